"""The survey of GPU types: what a solve costs on each machine.

``cost``: the cost-per-solve formula and its packed variant, the original study's table
(``data/survey/reference.csv``) reproduced with one set-up constant per group of rows, fightlab's
measured rows and its bench rows' estimates (ours and the rented survey's) priced, and the
buying guide per budget band; it reads tables only (the measure layer's summaries), so Figure 3
(``fightlab.figures.survey``) and notebook 07 draw from it.
``bench.sky.yaml``, ``hostcheck`` and ``offers``: the rented host's task, its check before install,
and Vast's offers filtered by fightlab (part 3; the launcher is ``fightlab.survey_launch``).
"""
