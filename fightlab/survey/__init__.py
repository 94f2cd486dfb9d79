"""The survey of GPU types (issue 19): what a solve costs on each machine.

``cost`` (this layer's only module now): the cost-per-solve formula and its packed variant, the
original study's table (``data/survey/reference.csv``) reproduced with one set-up constant per
group of rows, fightlab's measured rows priced, and the buying guide per budget band. It reads
tables only (the measure layer's summaries), so Figure 3 (``fightlab.figures.survey``) and
notebook 07 draw from it. *(later)* ``bench`` (part 1) and the SkyPilot launcher (part 3).
"""
