"""The survey of GPU types: what a solve costs on each machine.

``cost`` (re-exporting ``reference``, the original study's table and the formula, and
``bench_rows``): every survey row priced and the buying guide; it reads tables only, so Figure 3
(``fightlab.figures.survey``) and notebook 07 draw from it. ``bench.sky.yaml`` with ``task``,
``hostcheck``, ``offers``, ``options`` and ``tries``: the rented host's task, its check before
install, Vast's offers filtered by fightlab, and the launcher's options and tries (the launcher
is ``fightlab.survey_launch``).
"""
