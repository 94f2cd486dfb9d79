"""Notebook 09's measurement: the single-launch Newton solve (:mod:`fightlab.kernels.newton`)
beside MuJoCo Warp's, as ``newton`` result rows.

* :func:`hotspot_table`: where a physics step's kernel time went, from ``profile`` rows (the
  committed ``data/results/profile.csv``): the mass-matrix factor and the constraint solve per
  row, today's training physics (``EnvConfig``'s solver fields) marked.
* :func:`correctness`: one solve from the same state by the kernel, by MuJoCo Warp and by the
  float64 replica, and a short rollout against a one-ulp nudge's drift
  (:func:`fightlab.measure.newton.solve_errors`, :func:`~fightlab.measure.newton.rollout_errors`).
* :func:`step_time`: launches and graph time per physics step (:func:`fightlab.measure.profile.profile`)
  with ``solver_loop`` MuJoCo Warp's ("unrolled" for training's short loop) or "single_launch".
* :func:`run_body`: a body's rows at one world count: MuJoCo Warp's solve, then the single
  launch with each kernel variant's stage clock (:func:`fightlab.measure.newton_stages.stage_cycles`;
  a variant: the fixes of :data:`fightlab.kernels.newton_hessian.FIXES` built in).

On warp's CPU device every path runs with real block barriers (``wp.config.enable_cpu_blocks``)
and nothing is timed: kernel times are a GPU measurement (cycles are the CPU's counter).
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any, Iterable

import pandas as pd

from fightlab.measure.newton_stages import NWARM_STANDING, _num, newton_row, variant_fixes, variant_label, variant_row

__all__ = ["MODELS", "model_of", "VARIANTS", "TOL", "check_parameters", "cpu_blocks", "hotspot_table", "hotspot_lines",
           "own_profile", "kernel_facts", "correctness", "error_failures",
           "step_time", "stage_profile", "run_body", "error_row", "newton_row", "stage_table", "error_table",
           "speed_table"]

#: the kernel variants of ``bench/newton_stages.sh``: the first CUDA build ("none"), the fixes
#: added one by one, "all" (every fix); :func:`run_body` adds "default" (``DEFAULT_FIXES``, what
#: ``solver_loop=single_launch`` builds), the one it also times
VARIANTS = ("none", "bounds", "bounds,scatter", "bounds,scatter,pairs", "bounds,scatter,pairs,ldlt",
            "bounds,scatter,pairs,ldlt,tree", "bounds,scatter,pairs,ldlt,tree,levels", "all")
#: bodies besides fightlab's: the held-out contact tree of :mod:`fightlab.measure.newton`
MODELS = ("contact-tree-16",)
#: float32 rounding's scale in a solve (tests/test_newton.py): the kernel's error against float64
#: within 3x MuJoCo Warp's own or TOL, kernel vs MuJoCo Warp within 2 TOL
TOL = 1e-4


def check_parameters(bodies: Any, nworlds: Any, stage_nworlds: Any, variants: Any, check_nworld: Any,
                     rollout_steps: Any) -> None:
    """Notebook 09's parameters, each refused in one line (ConfigError) before any work."""
    from fightlab.config import ConfigError, validate_body, validate_nworld

    if not isinstance(bodies, list) or not bodies:
        raise ConfigError(f"bodies must be a non-empty list of {', '.join(_bodies())}, got {bodies!r}")
    for b in bodies:
        if b not in _bodies():
            raise ConfigError(f"bodies: unknown body {b!r}; choices: {', '.join(_bodies())}")
    for name, ns in (("nworlds", nworlds), ("stage_nworlds", stage_nworlds)):
        if not isinstance(ns, list) or not ns:
            raise ConfigError(f"{name} must be a non-empty list of world counts, got {ns!r}")
        for n in ns:
            validate_nworld(n)
            if ns.count(n) > 1:
                raise ConfigError(f"{name}: {n} is listed twice")
    if not isinstance(variants, list) or not variants:
        raise ConfigError(f"variants must be a non-empty list of {', '.join(VARIANTS)}, got {variants!r}")
    for v in variants:
        try:
            variant_fixes(v)
        except (ValueError, AttributeError):
            raise ConfigError(f"variants: {v!r} is not 'all', 'default', 'none' or a comma list of fixes; choices: "
                              f"{', '.join((*VARIANTS, 'default'))}") from None
    if isinstance(check_nworld, bool) or not isinstance(check_nworld, int) or not 1 <= check_nworld <= 64:
        raise ConfigError(f"check_nworld must be an integer in [1, 64], got {check_nworld!r}")
    if isinstance(rollout_steps, bool) or not isinstance(rollout_steps, int) or not 0 <= rollout_steps <= 10_000:
        raise ConfigError(f"rollout_steps must be an integer in [0, 10000] (0: no rollout), got {rollout_steps!r}")
    validate_body(bodies[0])


def _bodies() -> tuple[str, ...]:
    from fightlab.bodies import BODY_NAMES

    return tuple(BODY_NAMES)


@contextlib.contextmanager
def cpu_blocks(device: str):
    """On warp's CPU device, blocks run as cooperative fibers (real barriers) inside; a GPU is
    left alone."""
    import warp as wp

    saved = wp.config.enable_cpu_blocks
    if not str(device).startswith("cuda"):
        wp.config.enable_cpu_blocks = True
    try:
        yield
    finally:
        wp.config.enable_cpu_blocks = saved


# --- where the time went ------------------------------------------------------------------------

def _f(x: Any) -> float:
    """A table's number: NaN for empty (None, "")."""
    v = pd.to_numeric(pd.Series([x]), errors="coerce").iloc[0]
    return float(v)


def _said(v) -> str:
    """A profile row's setting as text; "not recorded" for rows older than the setting's column."""
    return "not recorded" if v is None else str(v)


def hotspot_table(profile_rows: pd.DataFrame) -> pd.DataFrame:
    """Per ``profile`` row (newest per body, nworld, GPU and physics): the physics it ran
    (``iterations`` / ``ls_iterations``, qacc_smooth, eulerdamp, the factor path), ``training``
    (True where that is today's ``EnvConfig``), kernel and graph ms per step, the mass-matrix
    factor's and the constraint solve's ms, launches and share of kernel time. Empty (same
    columns) for no rows."""
    from fightlab.config import EnvConfig

    cols = ["body", "nworld", "gpu", "physics", "training", "kernel_ms_per_step", "graph_ms_per_step",
            "factor_ms_per_step", "factor_share", "factor_launches_per_step", "solve_ms_per_step", "solve_share",
            "solve_launches_per_step", "launches_per_step", "time"]
    if profile_rows is None or profile_rows.empty:
        return pd.DataFrame(columns=cols)
    env = EnvConfig()
    out = []
    for r in profile_rows.itertuples():
        p = json.loads(r.params)
        if p.get("what", "physics") != "physics":
            continue
        it, ls = p.get("iterations"), p.get("ls_iterations")
        qs, ed = p.get("qacc_smooth"), p.get("eulerdamp")
        training = (it, ls, qs, ed) == (env.solver_iterations, env.solver_ls_iterations,
                                        env.solver_qacc_smooth, env.solver_eulerdamp)
        kernel = _f(r.kernel_ms_per_step)
        out.append(dict(
            body=r.body, nworld=int(r.nworld), gpu=r.gpu, training=training, time=r.time,
            physics=(f"Newton {it}/{ls}, qacc_smooth {_said(qs)}, eulerdamp {_said(ed)}, "
                     f"factor {_said(p.get('factor_path'))}"),
            kernel_ms_per_step=kernel, graph_ms_per_step=_f(r.graph_ms_per_step),
            factor_ms_per_step=_f(r.mass_matrix_factor_ms_per_step),
            factor_share=_f(r.mass_matrix_factor_ms_per_step) / kernel,
            factor_launches_per_step=float(r.mass_matrix_factor_launches_per_step),
            solve_ms_per_step=_f(r.constraint_solve_ms_per_step),
            solve_share=_f(r.constraint_solve_ms_per_step) / kernel,
            solve_launches_per_step=float(r.constraint_solve_launches_per_step),
            launches_per_step=float(r.launches_per_step)))
    df = pd.DataFrame(out, columns=cols)
    df = df.sort_values("time", kind="stable").drop_duplicates(["body", "nworld", "gpu", "physics"], keep="last")
    return df.sort_values(["training", "body", "nworld", "time"]).reset_index(drop=True)


def hotspot_lines(table: pd.DataFrame) -> list[str]:
    """One line per row of :func:`hotspot_table`: the factor's and the solve's share of kernel
    time and of the launches (untimed rows: launches only)."""
    out = []
    for r in table.itertuples():
        what = "today's training physics" if r.training else "an earlier physics"
        shares = ("untimed" if math.isnan(r.kernel_ms_per_step) else
                  f"factor {100 * r.factor_share:.0f} %, solve {100 * r.solve_share:.0f} % of kernel time")
        out.append(f"{r.body} ×{r.nworld} on {r.gpu} ({what}: {r.physics}): {shares}; launches per step: "
                   f"factor {r.factor_launches_per_step:g}, solve {r.solve_launches_per_step:g} of {r.launches_per_step:g}")
    return out


def own_profile(bodies: Iterable[str], nworld: int, device: str, nstep: int = 20) -> pd.DataFrame:
    """:func:`hotspot_table` of this run's own profile (:func:`fightlab.measure.profile.profile`,
    today's training physics, MuJoCo Warp's solve) per body at ``nworld`` worlds: on a CPU
    launches only (one untimed step)."""
    from fightlab.measure import profile

    cuda = str(device).startswith("cuda")
    rows = [profile.result_row(profile.profile(b, nworld=nworld, nstep=nstep if cuda else 1, device=device,
                                               graph=cuda, settle_steps=5 if cuda else 1)) for b in bodies]
    return hotspot_table(pd.DataFrame(rows))


def kernel_facts(body: str) -> dict:
    """What the single-launch solve takes for ``body`` (read from its model, on the CPU): nv,
    threads per world, the shared floats of H (packed lower triangle with the gradient row) and
    KiB, whether its rows are root-to-body chains (the tree LDLᵀ runs), the stages the clock
    reads, MuJoCo Warp's reason to refuse it (None: taken)."""
    from fightlab.kernels import newton as N
    from fightlab.kernels.newton_tree import rows_are_chains
    from fightlab.kernels.stage_clock import STAGES
    from fightlab.sim import physics

    mjm, slots = model_of(body)
    m, _ = physics.put(mjm, 1, slots or physics.Slots(None, None, "given"), "cpu", qacc_smooth=False,
                       solver_loop="unrolled")
    return dict(body=body, nv=int(m.nv), threads_per_world=N.BLOCK_DIM, shared_floats=N.shared_floats(m.nv),
                shared_kib=4 * N.shared_floats(m.nv) / 1024, shared_max_floats=N.SHARED_MAX,
                tree_ldlt=bool(rows_are_chains(m)), refused=N.newton_support(m), stages=len(STAGES))


# --- correctness ----------------------------------------------------------------------------------

def model_of(body: str):
    """(MuJoCo model, slots): a fightlab body, or a name of :data:`MODELS` (slots None: the model's own)."""
    from fightlab.bodies import build
    from fightlab.measure import newton as NM
    from fightlab.sim import physics

    if body == "contact-tree-16":
        return NM.contact_tree_model(16, seed=0), None
    return build(body), physics.slots_for(body)


def correctness(body: str, device: str = "cpu", nworld: int = 3, seed: int = 0, noise: float = 0.05,
                rollout_steps: int = 100) -> dict:
    """One solve (:func:`fightlab.measure.newton.solve_errors`: the kernel, MuJoCo Warp and the
    float64 replica from the same state after 5 steps) and a rollout of ``rollout_steps`` steps
    (:func:`~fightlab.measure.newton.rollout_errors`, 2 worlds; 0 skips it) of ``body`` (a fightlab
    body or one of :data:`MODELS`). Returns the ``newton`` row's error columns (normwise relative
    errors; rollout drift in m or rad) and ``niter`` / ``nefc`` lists."""
    from fightlab.measure import newton as NM

    mjm, slots = model_of(body)
    with cpu_blocks(device):
        e = NM.solve_errors(mjm, nworld=nworld, seed=seed, device=device, nsteps=5, slots=slots, noise=noise)
        r = (NM.rollout_errors(mjm, nworld=2, nsteps=rollout_steps, seed=seed + 1, device=device, slots=slots,
                               noise=noise) if rollout_steps > 0 else None)
    out = {f"{k}_rel_err_vs_stock": e[f"{k}_new_stock"] for k in ("qacc", "efc_force")}
    out.update({f"{k}_rel_err_vs_f64": e[f"{k}_new_f64"] for k in ("qacc", "efc_force")})
    out.update({f"stock_{k}_rel_err_vs_f64": e[f"{k}_stock_f64"] for k in ("qacc", "efc_force")})
    out.update(state_diff_rows=e["state_diff_new_stock"], niter_equal=bool(e["niter_equal"] and e["overflow_equal"]),
               rollout_steps=rollout_steps, rollout_qpos_dev=r["qpos_new_stock"] if r else None,
               rollout_qpos_dev_ulp=r["qpos_ulp_stock"] if r else None, niter=e["niter"], nefc=e["nefc"])
    return out


# --- speed -----------------------------------------------------------------------------------------

def step_time(body: str, nworld: int, device: str, solver_loop: str = "auto", nstep: int = 20,
              repeats: int = 20) -> dict:
    """Launches per physics step (all, and the constraint solve's) and, on a GPU, graph ms per
    captured step and the solve's kernel ms (activity-timed, uncaptured: an upper bound), of
    today's training physics with ``solver_loop`` (:func:`fightlab.measure.profile.profile`).
    On a CPU one untimed step: the times None."""
    from fightlab.measure import profile

    cuda = str(device).startswith("cuda")
    with cpu_blocks(device):
        res = profile.profile(body, nworld=nworld, nstep=nstep if cuda else 1, device=device, graph=cuda,
                              repeats=repeats, settle_steps=5 if cuda else 1, solver_loop=solver_loop)
    st = res.by_stage.set_index("stage")
    return dict(graph_ms_per_step=_num(res.graph_ms_per_step) if cuda else None,
                physics_steps_per_s=_num(res.physics_steps_per_s) if cuda else None,
                launches_per_step=float(res.launches_per_step),
                solve_launches_per_step=float(st.loc["constraint solve", "launches_per_step"]),
                solve_ms_per_step=_num(st.loc["constraint solve", "ms_per_step"]) if cuda else None,
                solver_loop=res.params.get("solver_loop", solver_loop))


def stage_profile(body: str, nworld: int, device: str, variant: str = "all", nsteps: int = 20,
                  nwarm: int = 10) -> dict:
    """The stage clock of the single-launch solve built with ``variant``'s fixes
    (:func:`fightlab.measure.newton_stages.stage_cycles`): median cycles per stage per world's
    solve, ``total``, rebuilds and brackets per solve, nefc."""
    from fightlab.measure.newton_stages import stage_cycles

    with cpu_blocks(device):
        return stage_cycles(body, nworld, nsteps, device, nwarm=nwarm, fixes=variant_fixes(variant))


# --- rows --------------------------------------------------------------------------------------------

def run_body(body: str, nworld: int, device: str, size: str, variants: Iterable[str] = VARIANTS,
             errors: dict | None = None, nsteps: int = 20, repeats: int = 20, nwarm: int = 10) -> list[dict]:
    """``body``'s ``newton`` rows at ``nworld`` worlds: MuJoCo Warp's solve (its loop for the
    training physics, `physics.resolve_solver_loop`: launches, graph time), then one row per kernel ``variant`` of the single launch
    (its stage clock), then "default" (added when not listed), the build
    ``solver_loop=single_launch`` runs (``DEFAULT_FIXES``), with launches, graph time and
    ``errors``, a :func:`correctness` result; on a CPU launches only (:func:`step_time`). Rows
    are returned, not written (:func:`fightlab.results.publish_row` writes them)."""
    from fightlab.config import EnvConfig
    from fightlab.sim.physics import resolve_solver_loop

    base = dict(size=size, nsteps=nsteps, nwarm=nwarm, repeats=repeats)
    stock = step_time(body, nworld, device, resolve_solver_loop("auto", EnvConfig().solver_iterations), nsteps,
                      repeats)
    rows = [newton_row(body, nworld, device, dict(base, solver_loop=stock["solver_loop"], variant="mujoco_warp"),
                       dict(stock, single_launch=False))]
    for variant in [v for v in variants if v != "default"] + ["default"]:
        cyc = stage_profile(body, nworld, device, variant, nsteps, nwarm)
        extra, more = {}, {}
        if variant == "default":
            extra.update(step_time(body, nworld, device, "single_launch", nsteps, repeats))
            extra.update({k: v for k, v in (errors or {}).items() if k not in ("niter", "nefc")})
            if errors:
                more = dict(check_niter=errors.get("niter"), check_nefc=errors.get("nefc"))
        rows.append(variant_row(body, nworld, device, variant, cyc, dict(base, **more), extra))
    return rows


def error_row(body: str, nworld: int, device: str, size: str, errors: dict) -> dict:
    """A ``newton`` row of correctness only (e.g. the held-out tree, which trains nothing): the
    single launch's ``errors`` (:func:`correctness`) at ``nworld`` checked worlds."""
    params = dict(size=size, solver_loop="single_launch", variant="default", check_niter=errors.get("niter"),
                  check_nefc=errors.get("nefc"))
    return newton_row(body, nworld, device, params,
                      dict({k: v for k, v in errors.items() if k not in ("niter", "nefc")}, single_launch=True))


def error_failures(errors: dict) -> list[str]:
    """What in a :func:`correctness` result breaks the rule of ``tests/test_newton.py`` (empty:
    equal to MuJoCo Warp's solve up to float32 rounding), one line each."""
    bad = []
    for k in ("qacc", "efc_force"):
        new, own, vs = (errors[f"{k}_rel_err_vs_f64"], errors[f"stock_{k}_rel_err_vs_f64"],
                        errors[f"{k}_rel_err_vs_stock"])
        if not new <= max(3 * own, TOL):
            bad.append(f"{k}: {new:.2e} from float64, more than 3x MuJoCo Warp's own {own:.2e} and {TOL:g}")
        if not vs <= 2 * TOL:
            bad.append(f"{k}: {vs:.2e} from MuJoCo Warp's, more than {2 * TOL:g}")
    if errors["state_diff_rows"] or not errors["niter_equal"]:
        bad.append(f"{errors['state_diff_rows']} row states differ, iterations/overflow equal: {errors['niter_equal']}")
    dev, ulp = errors.get("rollout_qpos_dev"), errors.get("rollout_qpos_dev_ulp")
    if dev is not None and not dev <= max(10 * ulp, 5e-5):
        bad.append(f"rollout drift {dev:.2e} more than 10x a one-ulp nudge's {ulp:.2e} and 5e-5")
    return bad


def speed_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (body, nworld): MuJoCo Warp's solve beside the single launch as
    ``solver_loop=single_launch`` builds it (variant "default"): launches per step (all, the
    solve's), graph ms per step, the solve's kernel ms, the stage clock's total."""
    variant = pd.Series([json.loads(p).get("variant") for p in rows["params"]], index=rows.index)
    df = rows[variant.isin(["mujoco_warp", "default"]) & rows["launches_per_step"].notna()]
    df = df.assign(solve=["single launch" if s else "MuJoCo Warp" for s in df["single_launch"].astype(bool)])
    return df[["body", "nworld", "gpu", "solve", "launches_per_step", "solve_launches_per_step",
               "graph_ms_per_step", "solve_ms_per_step", "solve_cycles_median"]].reset_index(drop=True)


def stage_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Stages as rows, one column per single-launch row's (body, nworld, variant; a variant named
    as :func:`newton_stages.variant_label` names it, by the fixes it had on its day; the warm
    steps where not the standing state's 10): median
    cycles per world's solve, in thousands, from ``params.stage_cycles``; then the total."""
    from fightlab.kernels.stage_clock import STAGES

    cols = {}
    for r in rows.itertuples():
        p = json.loads(r.params)
        if "stage_cycles" in p:
            state = "" if p.get("nwarm", NWARM_STANDING) == NWARM_STANDING else f", {p['nwarm']} warm steps"
            cols[f"{r.body} ×{r.nworld} [{variant_label(p)}{state}]"] = {**p["stage_cycles"], "total": r.solve_cycles_median}
    return (pd.DataFrame(cols).reindex([*STAGES, "total"]) / 1e3).round(1) if cols else pd.DataFrame()


def error_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The correctness columns of the rows that carry them: body, nworld, the kernel's errors
    beside MuJoCo Warp's own against float64, the rollout's drift beside a one-ulp nudge's."""
    cols = ["body", "qacc_rel_err_vs_stock", "qacc_rel_err_vs_f64", "stock_qacc_rel_err_vs_f64",
            "efc_force_rel_err_vs_stock", "efc_force_rel_err_vs_f64", "stock_efc_force_rel_err_vs_f64",
            "state_diff_rows", "niter_equal", "rollout_steps", "rollout_qpos_dev", "rollout_qpos_dev_ulp"]
    have = rows[pd.to_numeric(rows["qacc_rel_err_vs_f64"], errors="coerce").notna()]
    return have[cols].drop_duplicates("body").reset_index(drop=True)
