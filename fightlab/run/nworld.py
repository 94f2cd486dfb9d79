"""Choosing nworld for a training: the `--nworld auto` rule (:func:`pick_nworld`), a pure
function of measured numbers; the lab measures them (`fightlab.measure.sweep.auto_nworld`: the
committed iterations to solve and a ramp of short trainings on this GPU).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fightlab.config import ConfigError

#: the auto rule takes the fewest worlds predicted within this fraction of the fastest (2 %: less
#: than the seeds' spread of time to solve, 2–5 % on the H200, so closer points are not told apart)
AUTO_TOLERANCE = 0.02


def interp_iterations(nworld: float, known: dict[int, float]) -> float:
    """Iterations to solve at ``nworld``, linear in log2(nworld) between the two nearest known
    world counts (``known``: {nworld: median iterations}); NaN outside the known range (no
    extrapolation)."""
    xs = sorted(known)
    if not xs or not xs[0] <= nworld <= xs[-1]:
        return math.nan
    lx = np.log2(xs)
    return float(np.interp(math.log2(nworld), lx, [known[x] for x in xs]))


def pick_nworld(ramp: dict[int, float], known: dict[int, float],
                tolerance: float = AUTO_TOLERANCE) -> tuple[int, pd.DataFrame]:
    """The auto rule, a pure function: predicted time to solve(n) = iterations(n) × s_per_iter(n)
    for each ramp world count n inside the known range (`interp_iterations`), then the smallest
    n whose prediction is within ``tolerance`` (a fraction) of the minimum.

    Args:
      ramp: {nworld: measured seconds per iteration on this machine} (> 0, finite);
      known: {nworld: median iterations to solve} from committed runs (>= 2 world counts).
    Returns:
      (chosen nworld, table): the table has one row per ramp point, sorted by nworld:
      nworld, s_per_iter, iterations (interpolated; NaN outside), predicted_s, in_range, chosen.
    Raises:
      ConfigError: an empty ramp or a bad time in it, fewer than two known world counts, or no
        ramp point inside the known range; each says to pass --nworld N instead.
    """
    if not ramp:
        raise ConfigError("--nworld auto: the ramp measured no world count; pass --nworld N")
    bad = {n: s for n, s in ramp.items() if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0)}
    if bad:
        raise ConfigError(f"--nworld auto: the ramp's seconds per iteration must be positive, got {bad}; "
                          "pass --nworld N")
    known = {int(n): float(i) for n, i in known.items() if i == i and i > 0}
    if len(known) < 2:
        raise ConfigError(f"--nworld auto needs iterations to solve at two or more world counts "
                          f"(committed: {sorted(known) or 'none'}; run the world sweep's solve "
                          "trainings, python -m fightlab sweep --solve); pass --nworld N")
    ns = sorted(ramp)
    table = pd.DataFrame(dict(nworld=[int(n) for n in ns], s_per_iter=[float(ramp[n]) for n in ns],
                              iterations=[interp_iterations(n, known) for n in ns]))
    table["predicted_s"] = table["iterations"] * table["s_per_iter"]
    table["in_range"] = table["iterations"].notna()
    ok = table[table["in_range"]]
    if ok.empty:
        raise ConfigError(f"--nworld auto: no ramp world count ({', '.join(map(str, sorted(ramp)))}) lies "
                          f"within the committed range {min(known)}–{max(known)}; pass --nworld N")
    best = ok["predicted_s"].min()
    chosen = int(ok[ok["predicted_s"] <= best * (1.0 + tolerance)]["nworld"].min())
    table["chosen"] = table["nworld"] == chosen
    return chosen, table
