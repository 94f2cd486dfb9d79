"""Cycles per stage of the single-launch Newton solve, read by its instrumented build.

:func:`stage_cycles` runs ``nsteps`` physics steps of a body (today's training physics, MuJoCo
Warp's step with the single-launch solve switched on with a stage clock,
:mod:`fightlab.kernels.stage_clock`) and returns, per stage, the median over worlds and steps of
the cycles thread 0 of a world's block spent in it (SM cycles on CUDA; the CPU's cycle counter on
warp's CPU device, a smoke value only), the median total, and the mean counts (factorizations,
line-search brackets) per solve. The state: the keyframe with joint noise and random constant
controls, ``nwarm`` steps first with MuJoCo Warp's solve (contacts and a warm start). One block
per world: on a GPU where every block is resident at once, a world's total is the kernel's
latency. ``python -m fightlab.measure.newton_stages --help``: the table, and a CSV row per
(body, nworld) with ``results.run_metadata``'s columns (bench/newton_stages.sh).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

#: warm steps of the standing state (the keyframe with noise, few contacts): the stage rows a
#: figure compares; a row without ``nwarm`` had it
NWARM_STANDING = 10

__all__ = ["NWARM_STANDING", "stage_cycles", "stage_row", "newton_row", "variant_row", "variant_label", "format_table", "main"]


def stage_cycles(body: str, nworld: int = 2, nsteps: int = 2, device: str = "cpu", seed: int = 0,
                 nwarm: int = NWARM_STANDING, noise: float = 0.05, block_dim: int | None = None,
                 fixes: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Median cycles per stage (:data:`stage_clock.STAGES`) over ``nworld`` worlds × ``nsteps``
    steps, ``total`` (the median of the per-solve sums; ``total_p90``, ``total_max``: their 90th
    percentile and largest, the slowest world setting a launch's time), the mean counts per solve, the median
    and largest nefc, ``built`` (the fixes the kernel had: :func:`newton.built_fixes`); ``block_dim``:
    threads per world (None: the kernel's default); ``fixes``: those of
    :data:`newton_hessian.FIXES` asked for (None: ``DEFAULT_FIXES``, the solve's default)."""
    import mujoco_warp as mjw
    import warp as wp

    from fightlab.bodies import build
    from fightlab.config import EnvConfig
    from fightlab.kernels import newton as N
    from fightlab.kernels import stage_clock as C
    from fightlab.measure.factor import random_state, set_state
    from fightlab.sim import physics

    mjm = physics.prepare_mjmodel(build(body), EnvConfig())
    m, d = physics.put(mjm, nworld, physics.slots_for(body), device, qacc_smooth=False, solver_loop="unrolled")
    rng = np.random.default_rng(seed)
    qpos, qvel = random_state(mjm, nworld, rng)
    base = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    qpos = (base + noise / 0.5 * (qpos - base)).astype(np.float32)
    ctrl = rng.uniform(-0.5, 0.5, (nworld, mjm.nu)).astype(np.float32)
    set_state(d, qpos, (qvel * noise).astype(np.float32), ctrl)
    for _ in range(nwarm):
        mjw.step(m, d)
    clock = wp.zeros((nworld, C.NCOLS), dtype=wp.int64, device=d.qacc.device)
    built = N.built_fixes(m, N.DEFAULT_FIXES if fixes is None else fixes)
    reason = N.use_newton(m, block_dim=block_dim or N.BLOCK_DIM, stage_clock=clock, fixes=fixes)
    if reason is not None:
        raise ValueError(f"the single-launch solve does not take {body}: {reason}")
    per_step, nefc = [], []
    try:
        for _ in range(nsteps):
            clock.zero_()
            mjw.step(m, d)
            per_step.append(clock.numpy().copy())
            nefc.append(d.nefc.numpy().copy())
    finally:
        N.disable_newton(m)
    a = np.concatenate(per_step)  # (nsteps * nworld, NCOLS)
    ns = len(C.STAGES)
    out = {s: float(np.median(a[:, i])) for i, s in enumerate(C.STAGES)}
    totals = a[:, :ns].sum(axis=1)
    out["total"] = float(np.median(totals))
    out["total_p90"], out["total_max"] = float(np.percentile(totals, 90)), float(totals.max())
    out.update({c: float(a[:, ns + i].mean()) for i, c in enumerate(C.COUNTS)})
    nefc = np.concatenate(nefc)
    out.update(nefc_median=float(np.median(nefc)), nefc_max=int(nefc.max()), nv=int(m.nv), built=list(built))
    return out


def variant_label(params: dict) -> str:
    """A stage row's kernel variant as drawn: its fixes as a comma list where the row says
    "default" (the build of its day), or "all" of a day whose fixes were not today's
    ``newton_hessian.FIXES``; " (default)" after the variant whose fixes are today's
    ``newton_hessian.DEFAULT_FIXES``, "default + a,b" for today's default with switches added."""
    from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES

    fixes, variant = tuple(params.get("fixes") or ()), params.get("variant")
    if fixes == DEFAULT_FIXES:
        return f"{','.join(fixes)} (default)"
    if set(fixes) > set(DEFAULT_FIXES):
        return "default + " + ",".join(f for f in fixes if f not in DEFAULT_FIXES)
    dated = variant == "default" or (variant == "all" and fixes != FIXES)
    return ",".join(fixes) if dated else str(variant)


def variant_fixes(variant: str) -> tuple[str, ...]:
    """The kernel fixes of a variant name: "all" (`newton_hessian.FIXES`), "default"
    (`DEFAULT_FIXES`, the solve's own build), "none" (the first build) or a comma list of fixes.
    Raises ValueError naming the valid ones."""
    from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES

    named = {"all": FIXES, "default": DEFAULT_FIXES, "none": ()}
    fixes = named[variant] if variant in named else tuple(variant.split(","))
    if not set(fixes) <= set(FIXES):
        raise ValueError(f"variant must be 'all', 'default', 'none' or a comma list of {', '.join(FIXES)}, "
                         f"got {variant!r}")
    return fixes


def stage_row(body: str, nworld: int, nsteps: int, device: str, cycles: dict[str, Any],
              fixes: tuple[str, ...] | None = None, nwarm: int = NWARM_STANDING) -> dict[str, Any]:
    """A CSV row: ``results.run_metadata``'s columns (params: nsteps, nwarm, the fixes built in),
    then ``<stage>_cycles`` and the counts."""
    from fightlab import results
    from fightlab.kernels import stage_clock as C
    from fightlab.kernels.newton_hessian import DEFAULT_FIXES

    params = dict(nsteps=nsteps, nwarm=nwarm, solver_loop="single_launch", fixes=list(DEFAULT_FIXES if fixes is None else fixes),
                  built=cycles.get("built"))
    row = results.run_metadata(body=body, nworld=nworld, seed=0, params=params, device=device)
    slug = lambda s: s.replace(" ", "_").replace("+", "and").replace(".", "")  # noqa: E731
    row.update({f"{slug(s)}_cycles": cycles[s] for s in (*C.STAGES, "total")})
    row.update({c: cycles[c] for c in (*C.COUNTS, "nefc_median", "nefc_max", "nv")})
    return row


def _num(x: Any) -> float | None:
    """A row's number: None for "not measured" (None, NaN)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def newton_row(body: str, nworld: int, device: str, params: dict, metrics: dict, seed: int = 0) -> dict:
    """A ``newton`` row: ``results.run_metadata`` (``params`` as given) and the experiment's
    metric columns from ``metrics`` (absent: None, not measured)."""
    from fightlab import results

    row = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device=device)
    for c in results.EXPERIMENTS["newton"]:
        v = metrics.get(c)
        row[c] = v if isinstance(v, bool) or v is None else _num(v)
    return row


def variant_row(body: str, nworld: int, device: str, variant: str, cycles: dict, base: dict,
                extra: dict | None = None) -> dict:
    """The ``newton`` row of one kernel ``variant``'s stage clock (``cycles``:
    :func:`stage_profile`'s dict): params ``base`` with the variant, its fixes and the cycles per
    stage; metrics the solve's median cycles, rebuilds and brackets per solve, nefc, and ``extra``
    (launches, graph time, correctness) where measured."""
    from fightlab.kernels.stage_clock import STAGES

    m = dict(single_launch=True, solve_cycles_median=cycles["total"], rebuilds_per_solve=cycles["rebuilds"],
             brackets_per_solve=cycles["brackets"], nefc_median=cycles["nefc_median"], **(extra or {}))
    params = dict(base, solver_loop="single_launch", variant=variant, fixes=list(variant_fixes(variant)),
                  built=cycles.get("built"), stage_cycles={s: cycles[s] for s in STAGES},
                  solve_cycles_p90=cycles.get("total_p90"), solve_cycles_max=cycles.get("total_max"),
                  cycles="SM cycles" if str(device).startswith("cuda") else "CPU cycle counter (smoke)")
    return newton_row(body, nworld, device, params, m)


def format_table(results: list[tuple[str, int, dict[str, Any]]]) -> str:
    """Stages as rows, one column per (body, nworld): median cycles (thousands) and the share."""
    from fightlab.kernels import stage_clock as C

    heads = [f"{b} x{n}" for b, n, _ in results]
    w = max(24, *(len(h) + 2 for h in heads))
    lines = ["stage (k cycles, share)".ljust(22) + "".join(h.rjust(w) for h in heads)]
    for s in (*C.STAGES, "total"):
        cells = [f"{r[s] / 1e3:10.1f} ({100 * r[s] / max(r['total'], 1):4.1f} %)" for _, _, r in results]
        lines.append(s.ljust(22) + "".join(c.rjust(w) for c in cells))
    for c in (*C.COUNTS, "nefc_median", "nefc_max"):
        lines.append(f"{c} per solve".ljust(22) + "".join(f"{r[c]:.2f}".rjust(w) for _, _, r in results))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fightlab.measure.newton_stages", description=__doc__.split("\n")[0])
    p.add_argument("--body", nargs="+", default=["simple", "muscular-fast"])
    p.add_argument("--nworld", nargs="+", type=int, default=[1024, 32])
    p.add_argument("--nsteps", type=int, default=20, help="instrumented physics steps")
    p.add_argument("--nwarm", type=int, default=NWARM_STANDING,
                   help="steps with MuJoCo Warp's solve first (10: standing, few contacts; 300: most worlds fallen)")
    p.add_argument("--device", default="cuda:0")
    from fightlab.kernels.newton_hessian import FIXES

    p.add_argument("--fixes", nargs="+", default=["all"],
                   help=f"kernel variants to compare, each 'all', 'default', 'none' or a comma list of {','.join(FIXES)} "
                        "(the fixes built in)")
    p.add_argument("--csv", default=None, help="append a row per (body, nworld, fixes) to this CSV")
    p.add_argument("--results-root", default=None,
                   help="also write each as a `newton` row (the committed table's schema, params size "
                        "'stages') to RESULTS_ROOT/data/results/newton.csv")
    a = p.parse_args(argv)
    if a.nsteps < 1 or a.nwarm < 0:
        print(f"fightlab: error: --nsteps must be >= 1 and --nwarm >= 0, got {a.nsteps} and {a.nwarm}", file=sys.stderr)
        return 2
    try:  # every variant checked before anything runs or is written
        variants = {v: variant_fixes(v) for v in a.fixes}
    except ValueError as e:
        print(f"fightlab: error: --fixes: {e}", file=sys.stderr)
        return 2
    res, rows = [], []
    for body in a.body:
        for n in a.nworld:
            for variant, fixes in variants.items():
                r = stage_cycles(body, n, a.nsteps, a.device, nwarm=a.nwarm, fixes=fixes)
                if set(r["built"]) != set(fixes):
                    print(f"{body} [{variant}]: built with {','.join(r['built']) or 'no fix'} "
                          f"(not {','.join(sorted(set(fixes) - set(r['built'])))}: newton.built_fixes)", flush=True)
                res.append((f"{body}{'' if variant == 'all' else ' [' + variant + ']'}", n, r))
                rows.append(stage_row(body, n, a.nsteps, a.device, r, fixes, a.nwarm))
                if a.results_root:
                    from fightlab import results

                    base = dict(size="stages", nsteps=a.nsteps, nwarm=a.nwarm, source="bench/newton_stages.sh")
                    results.append_row("newton", variant_row(body, n, a.device, variant, r, base),
                                       a.results_root)
                print(f"{res[-1][0]} x{n}: {json.dumps({k: round(v, 1) for k, v in r.items() if k != 'built'})}",
                      flush=True)
    print(format_table(res))
    if a.csv:
        path = Path(a.csv)
        new = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            if new:
                w.writeheader()
            w.writerows(rows)
        print(f"{len(rows)} rows -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
