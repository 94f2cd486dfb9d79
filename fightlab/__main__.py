"""python -m fightlab …: see fightlab.cli."""

import os
import sys

# `python -m` puts the working directory first on sys.path; run from inside the package (say
# fightlab/measure), fightlab's own modules there (profile.py, nvtx.py) would shadow the standard
# library's and installed packages of the same name (warp imports cProfile, which imports
# profile). Drop such entries: fightlab itself is found through its install or the repository.
_PKG = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path
               if not (os.path.abspath(p or os.curdir) + os.sep).startswith(_PKG + os.sep)]

try:  # Ctrl-C while torch and warp load (the first seconds) is the same one line as later
    from fightlab.cli import main  # noqa: E402 (after the sys.path fix above)
except KeyboardInterrupt:
    print("fightlab: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
