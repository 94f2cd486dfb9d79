"""python -m fightlab …: see fightlab.cli."""

from fightlab.cli import main

raise SystemExit(main())
