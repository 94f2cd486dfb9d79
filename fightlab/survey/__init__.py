"""The survey of GPU types: what a solve costs on each machine.

``cost`` (with ``reference``, the original study's table and the formula, and ``bench_rows``, both
re-exported by it): the cost per solve, the original's table reproduced with one set-up constant
per group of rows, fightlab's measured rows and its bench rows' estimates (ours and the rented
survey's) priced, and the buying guide per budget band; it reads tables only, so Figure 3
(``fightlab.figures.survey``) and notebook 07 draw from it.
``bench.sky.yaml`` with ``task``, ``hostcheck``, ``offers``, ``options`` and ``tries``: the rented
host's task and upload, its check before install, Vast's offers filtered by fightlab, the
launcher's options and one GPU type's tries (the launcher is ``fightlab.survey_launch``).
"""
