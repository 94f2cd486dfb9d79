"""Where a physics step's GPU time goes: per-kernel timing grouped by stage.

    res = profile.profile("muscular-fast", nworld=8192, nstep=20, device="cuda:0")
    res.by_stage, res.by_kernel  # ms per step and share of kernel time, per stage / per kernel
    res.failures                 # ["other: 3.1% of kernel time > 2% ..."] when the stage table has gaps
    row = profile.result_row(res)  # a data/results/profile.csv row

``profile`` resets a ``StanceEnv`` (training settings, measured ``SLOTS``), steps it a few env
steps with random actions, then runs ``nstep`` *uncaptured* physics steps under warp's CUDA
activity timing (one record per kernel launch) while ``LaunchRecorder`` records every
``wp.launch`` on the host (the kernel's name, module and launches per step, on any device). One
step captured as a graph and replayed gives ``launch_overhead_ms_per_step = graph - kernels``
(launch latency and idle gaps). It can come out negative: activity-timed kernels of uncaptured
steps cost ~6 µs per launch more than the captured step (H200), so per-kernel times are an
upper bound; stage shares stay comparable. On the CPU warp records no kernel timing: the result
has ``timed=False``, NaN kernel times and a ``message`` saying so.

Stages: the kernel name -> stage table of :mod:`fightlab.measure.stages` (re-exported here); on
a GPU run more than ``OTHER_LIMIT`` (2 %) of kernel time in "other" is a failure.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from fightlab.measure.stages import (KERNEL_STAGES, MODULE_STAGES, OTHER_LIMIT, STAGE_DOC,  # noqa: F401
                                     STAGES, TREE_FACTOR_SHARED, check_other, cuda_base_name,
                                     factor_kind, kernel_key, stage_of, stage_slug, unmapped)
from fightlab.sim.nvtx import nvtx_range

#: most env steps one profile may run (each records every kernel launch it makes)
MAX_NSTEP = 100_000


@dataclass
class Record:
    """One timed launch: ``name`` as warp reports it, ``elapsed`` in ms (like wp.TimingResult)."""

    name: str
    elapsed: float


def aggregate(records: Iterable[Any], nstep: int, modules: dict[str, str] | None = None,
              launches: dict[str, int] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Group timing records (``.name``: warp's activity name or a kernel key, ``.elapsed`` ms;
    e.g. ``wp.timing_end()``'s list, may be empty) over ``nstep`` (int >= 1) steps by kernel and
    by stage, per step. ``modules``: kernel key -> defining module (``MODULE_STAGES``);
    ``launches``: key -> host-recorded launches, for kernels without records (all on the CPU).

    Returns (by_kernel, by_stage): kernel, module, stage, launches_per_step, ms_per_step (NaN
    when untimed), share of kernel time, sorted by time then launches; stage, launches_per_step,
    ms_per_step, share per stage of ``STAGES`` in order.
    """
    if isinstance(nstep, bool) or not isinstance(nstep, int) or nstep < 1:
        raise ValueError(f"nstep must be an int >= 1, got {nstep!r}")
    modules = modules or {}
    ms: dict[str, float] = {}
    count: dict[str, int] = {}
    for r in records:
        key = kernel_key(r.name)
        ms[key] = ms.get(key, 0.0) + float(r.elapsed)
        count[key] = count.get(key, 0) + 1
    timed = bool(ms)
    count = {**(launches or {}), **count}  # the host's launch counts where no record timed a kernel
    rows = [dict(kernel=key, module=modules.get(key, ""), stage=stage_of(key, modules.get(key)),
                 launches_per_step=n / nstep, ms_per_step=(ms.get(key, 0.0) / nstep) if timed else math.nan)
            for key, n in count.items()]
    by_kernel = pd.DataFrame(rows, columns=["kernel", "module", "stage", "launches_per_step", "ms_per_step"])
    total = by_kernel["ms_per_step"].sum() if timed else math.nan
    by_kernel["share"] = by_kernel["ms_per_step"] / total if timed and total > 0 else math.nan
    by_kernel = by_kernel.sort_values(["ms_per_step", "launches_per_step", "kernel"],
                                      ascending=[False, False, True], na_position="last")
    by_kernel = by_kernel.reset_index(drop=True)
    g = by_kernel.groupby("stage")
    by_stage = pd.DataFrame({
        "stage": list(STAGES),
        "launches_per_step": [float(g["launches_per_step"].sum().get(s, 0.0)) for s in STAGES],
        "ms_per_step": [float(g["ms_per_step"].sum().get(s, 0.0)) if timed else math.nan for s in STAGES],
    })
    by_stage["share"] = by_stage["ms_per_step"] / total if timed and total > 0 else math.nan
    return by_kernel, by_stage


def _dim_size(dim) -> int:
    return 1 if dim is None else dim if isinstance(dim, int) else int(np.prod([int(x) for x in dim]))


class LaunchRecorder:
    """Context manager recording every ``wp.launch`` / ``wp.launch_tiled`` (it wraps both
    ``warp.launch`` and warp's internal ``launch``); size-0 launches (warp skips them) are not
    counted. ``kernels``, ``modules``, ``launches``: key -> warp Kernel / defining module / count."""

    def __init__(self):
        self.kernels: dict[str, Any] = {}
        self.modules: dict[str, str] = {}
        self.launches: dict[str, int] = {}

    def __enter__(self) -> "LaunchRecorder":
        import warp as wp
        import warp._src.context as ctx

        self._wp, self._ctx = wp, ctx
        self._orig_wp, self._orig_ctx = wp.launch, ctx.launch
        orig = self._orig_ctx

        def launch(kernel, dim=None, *args, **kwargs):
            if _dim_size(dim) > 0:
                key = kernel.key
                self.kernels[key] = kernel
                self.modules[key] = getattr(getattr(kernel, "func", None), "__module__", "") or ""
                self.launches[key] = self.launches.get(key, 0) + 1
            return orig(kernel, dim, *args, **kwargs)

        wp.launch = launch
        ctx.launch = launch
        return self

    def __exit__(self, *exc) -> None:
        self._wp.launch = self._orig_wp
        self._ctx.launch = self._orig_ctx

    def mangled(self) -> dict[str, str]:
        """CUDA kernel base name (key + hash, as in timing records) -> key, for loaded kernels."""
        out = {}
        for key, k in self.kernels.items():
            try:
                out[k.get_mangled_name()] = key
            except Exception:  # noqa: BLE001 - no hash yet: kernel_key's regex handles the name
                pass
        return out


@dataclass
class ProfileResult:
    """Per-kernel timing of ``nstep`` uncaptured steps of one body (see ``profile``);
    ``*_ms_per_step`` are per profiled step (physics, or env: substeps plus the env kernels)."""

    body: str
    nworld: int
    nstep: int
    device: str
    what: str
    timed: bool
    message: str
    by_kernel: pd.DataFrame
    by_stage: pd.DataFrame
    launches_per_step: float
    kernel_ms_per_step: float
    graph_ms_per_step: float
    uncaptured_ms_per_step: float
    physics_per_step: int
    params: dict = field(default_factory=dict)

    @property
    def launch_overhead_ms_per_step(self) -> float:
        return self.graph_ms_per_step - self.kernel_ms_per_step

    @property
    def physics_steps_per_s(self) -> float:
        """World physics steps per second of the captured step (nworld x steps / time)."""
        if not self.graph_ms_per_step > 0:
            return math.nan
        return self.nworld * self.physics_per_step / (self.graph_ms_per_step * 1e-3)

    @property
    def failures(self) -> list[str]:
        return check_other(self.by_stage, self.by_kernel)

    def top_kernels(self, n: int = 15) -> pd.DataFrame:
        return self.by_kernel.head(n)

    @property
    def factor_path(self) -> str:
        """The mass-matrix factor path that ran, in words (:data:`FACTOR_PATHS`)."""
        path = self.params.get("factor_path", "")
        text = FACTOR_PATHS.get(path, path or "unknown")
        variant = self.params.get("tree_factor_variant")
        return f"{text}, {variant} variant" if path == "tree" and variant else text

    def summary(self) -> str:
        head = (f"{self.body} x{self.nworld} on {self.device}, {self.nstep} {self.what} step{'s' * (self.nstep != 1)}, "
                f"mass-matrix factor: {self.factor_path}, solver loop: {self.params.get('solver_loop', 'auto')}")
        if not self.timed:
            return f"{head}: {self.message}"
        return (f"{head}: kernels {self.kernel_ms_per_step:.3f} ms/step, graph "
                f"{self.graph_ms_per_step:.3f} ms/step, {self.launches_per_step:.0f} launches/step")

    def stage_table(self) -> pd.DataFrame:
        """``by_stage`` with the mass-matrix factor row naming the path measured, e.g.
        "mass-matrix factor (tree, shared)" or "(sparse)" (:data:`FACTOR_PATHS`)."""
        path = self.params.get("factor_path") or "unknown"
        variant = self.params.get("tree_factor_variant")
        name = f"mass-matrix factor ({path}{', ' + variant if 'tree' in path and variant else ''})"
        out = self.by_stage.copy()
        out["stage"] = out["stage"].replace({"mass-matrix factor": name})
        return out


def _cuda(device: str) -> bool:
    return str(device).startswith("cuda")


#: the mass-matrix factor paths ``params["factor_path"]`` names ("+"-joined when several ran)
FACTOR_PATHS = {"tree": "fightlab tree factor (single launch)",
                "sparse": "MuJoCo Warp per-level sparse factor",
                "dense": "dense tile Cholesky (trees up to 64 DOF)"}


def profile(body: str, nworld: int = 1024, nstep: int = 20, device: str | None = None,
            what: str = "physics", seed: int = 0, settle_steps: int = 5, graph: bool = True,
            cuda_filter: int | None = None, repeats: int = 20,
            tree_factor: bool = False, progress: bool = False, top: int = 1,
            env: "EnvConfig | None" = None, solver_loop: str = "auto") -> ProfileResult:
    """Per-kernel timing of ``nstep`` (1 … MAX_NSTEP) uncaptured steps of ``body`` with ``nworld``
    worlds (text or int) on ``device`` (None or "auto": cuda:0 when present, else cpu).

    Args:
        what: "physics" (``mujoco_warp.step``) or "env" (a whole ``StanceEnv`` step).
        seed: env seed; settle_steps: env steps with random actions before profiling.
        graph: also time the step captured as a graph (``graph_ms_per_step``; NaN without);
            repeats: timed graph replays (median); cuda_filter: default kernels + built-ins.
        tree_factor: factor M of trees over 64 DOF with fightlab's single-launch kernel instead
            of MuJoCo Warp's sparse path (notebook 02's default; the CLI's is training's);
            ``params["factor_path"]`` records which ran.
        progress: a tqdm bar over the phases; top: kernels the caller lists (checked, >= 1).
        env: the `EnvConfig` profiled (None: today's training physics).
        solver_loop: how the Newton solve runs (`TrainConfig.solver_loop`, one of
            ``physics.SOLVER_LOOPS``; "auto" with ``env`` None as training takes it,
            `physics.training_solver_loop`: fightlab's one-launch solve on CUDA where the body
            allows it; with an ``env``, e.g. the reference check's, MuJoCo Warp's loop);
            ``params["solver_loop"]`` records the loop that ran.

    Returns ``ProfileResult`` (on the CPU untimed, see the module docstring).
    Raises ConfigError: a bad body, nworld, device, ``nstep``, ``top`` or ``solver_loop`` (one line).
    """
    from fightlab.config import ConfigError, validate_body, validate_nworld
    from fightlab.config.rules import SOLVER_LOOPS

    if isinstance(nstep, bool) or not isinstance(nstep, int) or not 1 <= nstep <= MAX_NSTEP:
        raise ConfigError(f"--nstep must be an integer in [1, {MAX_NSTEP}] (profiled steps), got {nstep}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError(f"--top must be a positive integer (kernels to list), got {top}")
    if solver_loop not in SOLVER_LOOPS:
        raise ConfigError(f"--solver-loop must be one of {', '.join(SOLVER_LOOPS)}, got {solver_loop!r}")
    body, nworld = validate_body(body), validate_nworld(nworld)
    if what not in ("physics", "env"):
        raise ValueError(f"what must be 'physics' or 'env', got {what!r}")
    import mujoco_warp as mjw
    import torch
    from tqdm import tqdm

    from fightlab.devices import resolve_device
    from fightlab.envs.stance import StanceEnv
    from fightlab.sim import physics

    device = resolve_device(device)
    if env is None:  # today's training physics: "auto" as a training takes it
        solver_loop = physics.training_solver_loop(solver_loop, device)
    # a bar over the phases: the first (the env's kernels compiling) takes longest on a cold cache
    bar = tqdm(total=5 if graph else 4, desc=f"profile {body} ×{nworld}", unit="phase",
               disable=not progress, bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}]{postfix}")
    bar.set_postfix_str("build the env (compiles kernels)")
    env = StanceEnv(body, nworld, device, seed=seed, cfg=env, graph=False, tree_factor=tree_factor,
                    solver_loop=solver_loop)
    env.warmup()
    env.reset(stagger=True)
    _next_phase(bar, f"settle ({settle_steps} env steps)")
    gen = torch.Generator(device=env.action.device).manual_seed(seed)
    with physics.shared_stream(device):
        for _ in range(settle_steps):
            env.step(torch.rand(env.action.shape, generator=gen, device=env.action.device) * 2 - 1)
    if what == "physics":
        m, d = env.m, env.d
        step, physics_per_step = (lambda: mjw.step(m, d)), 1
    else:
        step, physics_per_step = env.launch_step, env.substeps
    rec, records, uncaptured_s, graph_ms = _time_steps(step, device, what, nstep, cuda_filter, graph, repeats,
                                                       bar)
    by_kernel, by_stage = aggregate(records, nstep, rec.modules, rec.launches)
    timed = bool(records)
    params = dict(what=what, nstep=nstep, timestep=float(env.mjm.opt.timestep),
                  iterations=int(env.mjm.opt.iterations), ls_iterations=int(env.mjm.opt.ls_iterations),
                  qacc_smooth=bool(env.m.opt.run_qacc_smooth),
                  eulerdamp=env.engine_solver["solver_eulerdamp"],
                  solver_loop=env.engine_solver["solver_loop"],
                  nconmax=env.slots.nconmax, njmax=env.slots.njmax,
                  factor_path=factor_kind(rec.launches), tree_factor=bool(tree_factor),
                  tree_factor_variant=env.tree_factor_variant,
                  settle_steps=settle_steps, cuda_filter=cuda_filter if cuda_filter is not None else "kernel+builtin",
                  # the single launch's build and the fused reset, where they ran (`StanceEnv.engine_solver`)
                  **{k: env.engine_solver[k] for k in ("newton_build", "reset") if k in env.engine_solver})
    return ProfileResult(
        body=body, nworld=nworld, nstep=nstep, device=device, what=what, timed=timed,
        message=_message(len(records), nstep, device), by_kernel=by_kernel, by_stage=by_stage,
        launches_per_step=float(sum(rec.launches.values())) / nstep,
        kernel_ms_per_step=float(by_kernel["ms_per_step"].sum()) if timed else math.nan,
        graph_ms_per_step=graph_ms, uncaptured_ms_per_step=uncaptured_s * 1e3,
        physics_per_step=physics_per_step, params=params,
    )


def _next_phase(bar, name: str) -> None:
    bar.update(1)
    bar.set_postfix_str(name)


def _time_steps(step, device: str, what: str, nstep: int, cuda_filter: int | None, graph: bool, repeats: int,
                bar) -> tuple[LaunchRecorder, list[Record], float, float]:
    """``profile``'s timed part: ``(recorder, records, uncaptured s per step, graph ms per step)``."""
    import warp as wp

    from fightlab import timing
    from fightlab.sim import physics

    cuda, records = _cuda(device), []
    with wp.ScopedDevice(device), physics.shared_stream(device):
        _next_phase(bar, f"profile {nstep} {what} steps")
        step()                                       # everything compiled and loaded
        wp.synchronize_device(device)
        with LaunchRecorder() as rec, nvtx_range("physics" if what == "physics" else "env"):
            if cuda:
                # default: kernels, warp's own and built-in ones such as sorts
                wp.timing_begin(cuda_filter=wp.TIMING_KERNEL | wp.TIMING_KERNEL_BUILTIN
                                if cuda_filter is None else cuda_filter)
            try:
                for _ in range(nstep):
                    step()
            finally:
                if cuda:
                    records = wp.timing_end()
        wp.synchronize_device(device)
        _next_phase(bar, "time uncaptured steps")
        uncaptured = timing.measure(step, device=device, warmup=1, repeats=max(3, min(repeats, nstep)))
        graph_ms = math.nan
        if graph:
            _next_phase(bar, "capture and time the graph")
            sg = physics.StepGraph(step, device)
            sg.capture()
            graph_ms = timing.measure(sg, device=device, warmup=2, repeats=repeats).median_s * 1e3
    _next_phase(bar, "done")
    bar.close()
    mangled = rec.mangled()
    records = [Record(mangled.get(cuda_base_name(r.name), kernel_key(r.name)), r.elapsed) for r in records]
    return rec, records, uncaptured.median_s, graph_ms


def _message(nrecords: int, nstep: int, device: str) -> str:
    if nrecords:
        return f"{nrecords} kernel records over {nstep} steps"
    if _cuda(device):
        return "warp returned no CUDA timing records (is another profiler holding CUPTI?)"
    return (f"no kernel timing on {device}: warp's activity timing (wp.timing_begin) records "
            "CUDA work only; kernel names and launch counts come from recording wp.launch, "
            "step times from the host clock")


def kernel_names(body: str, what: str = "env", nworld: int = 2, device: str = "cpu",
                 tree_factor: bool = False, env: "EnvConfig | None" = None) -> pd.DataFrame:
    """The kernels one step of ``body`` launches (no timing; cheap on the CPU): kernel, module,
    stage, launches_per_step; ``what``, ``env`` as in ``profile``."""
    res = profile(body, nworld=nworld, nstep=1, device=device, what=what, settle_steps=1,
                  graph=False, repeats=3, tree_factor=tree_factor, env=env)
    return res.by_kernel[["kernel", "module", "stage", "launches_per_step"]]


def row_metrics() -> tuple[str, ...]:
    """The metric columns of the "profile" experiment, in order (``fightlab.results``)."""
    return (
        ("nstep", "launches_per_step", "kernel_ms_per_step", "graph_ms_per_step",
         "uncaptured_ms_per_step", "launch_overhead_ms_per_step", "physics_steps_per_s")
        + tuple(f"{stage_slug(s)}_ms_per_step" for s in STAGES)
        + tuple(f"{stage_slug(s)}_launches_per_step" for s in STAGES)
        + ("mass_matrix_factor_share", "other_share")
    )


def _num(x) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def result_row(res: ProfileResult) -> dict:
    """A full "profile" row: metadata (``results.run_metadata``) + ``row_metrics()`` columns."""
    from fightlab import results

    st = res.by_stage.set_index("stage")
    row = results.run_metadata(body=res.body, nworld=res.nworld, seed=0, params=res.params, device=res.device)
    row.update(
        nstep=res.nstep, launches_per_step=res.launches_per_step,
        kernel_ms_per_step=_num(res.kernel_ms_per_step), graph_ms_per_step=_num(res.graph_ms_per_step),
        uncaptured_ms_per_step=_num(res.uncaptured_ms_per_step),
        launch_overhead_ms_per_step=_num(res.launch_overhead_ms_per_step),
        physics_steps_per_s=_num(res.physics_steps_per_s),
    )
    for s in STAGES:
        row[f"{stage_slug(s)}_ms_per_step"] = _num(st.loc[s, "ms_per_step"])
        row[f"{stage_slug(s)}_launches_per_step"] = float(st.loc[s, "launches_per_step"])
    row["mass_matrix_factor_share"] = _num(st.loc["mass-matrix factor", "share"])
    row["other_share"] = _num(st.loc["other", "share"])
    return row


#: the physics a profile row may have run (`physics_of`): today's training physics, the
#: reference check's, or any other solver setting
PHYSICS = ("training", "reference", "other")


def physics_key(iterations, ls_iterations, qacc_smooth, eulerdamp=True) -> tuple:
    """(solver iterations, line-search iterations, qacc_smooth, eulerdamp): what a row's physics
    is compared by (here and `measure.graphs.graphs_physics`)."""
    return int(iterations), int(ls_iterations), bool(qacc_smooth), bool(eulerdamp)


def profile_physics(params: dict) -> tuple:
    """:func:`physics_key` of a ``profile`` row's params (qacc_smooth, eulerdamp default to True)."""
    return physics_key(params["iterations"], params["ls_iterations"], params.get("qacc_smooth", True),
                       params.get("eulerdamp", True))


def physics_of(params: dict) -> str:
    """One of :data:`PHYSICS` for a profile row's params (its solver iterations, line-search
    iterations, qacc_smooth and eulerdamp against `EnvConfig`'s and `config.REFERENCE_SOLVER`'s)."""
    try:
        key = profile_physics(params)
    except (KeyError, TypeError, ValueError):  # a row without its solver fields
        return "other"
    return _known_physics().get(key, "other")


@functools.lru_cache(maxsize=1)
def _known_physics() -> dict:
    """{:func:`physics_key`: "training" or "reference"} of today's `EnvConfig` and its reference
    physics, built once (read-only)."""
    from fightlab.config import EnvConfig, reference_env

    return {physics_key(env.solver_iterations, env.solver_ls_iterations, env.solver_qacc_smooth,
                        env.solver_eulerdamp): name
            for name, env in (("reference", reference_env(EnvConfig())), ("training", EnvConfig()))}


def latest_rows(df: pd.DataFrame, solve: str | None = "MuJoCo Warp", physics: str | None = "training") -> pd.DataFrame:
    """The newest row per (body, nworld, gpu) of a profile table, sorted by body and nworld, among
    the rows whose training Newton solve is ``solve`` (one of `measure.learners.SOLVES`, as
    `measure.learners.solve_of` reads a row: "MuJoCo Warp", whose kernels the stage figure
    breaks down, or "single-launch") and whose physics is ``physics`` (one of :data:`PHYSICS`,
    :func:`physics_of`: a reference-physics row never stands for the training physics). None:
    every solve (or physics), the newest per key with a ``solve`` (``physics``) column.
    ValueError for another ``solve`` or ``physics``."""
    from fightlab.measure.learners import SOLVES, solve_of

    if solve is not None and solve not in SOLVES:
        raise ValueError(f"solve must be None or one of {', '.join(map(repr, SOLVES))}, got {solve!r}")
    if physics is not None and physics not in PHYSICS:
        raise ValueError(f"physics must be None or one of {', '.join(map(repr, PHYSICS))}, got {physics!r}")
    if df.empty:
        return df
    params = [json.loads(p) for p in df["params"]]
    df = df.assign(solve=[solve_of(p) for p in params], physics=[physics_of(p) for p in params])
    keys = ["body", "nworld", "gpu"] + (["solve"] if solve is None else []) + (["physics"] if physics is None else [])
    if solve is not None:
        df = df[df["solve"] == solve]
    if physics is not None:
        df = df[df["physics"] == physics]
    df = df.sort_values("time").groupby(keys, as_index=False).tail(1)
    return df.sort_values(keys).reset_index(drop=True)


def solve_table(df: pd.DataFrame, nworld: int = 1024) -> pd.DataFrame:
    """Each solve's newest profile row at ``nworld`` worlds per (gpu, body), side by side:
    launches, kernel and graph time per physics step [ms] and the constraint solve's share of
    the kernel time: the hotspot before and after the single launch. Empty when none."""
    rows = latest_rows(df[df["nworld"] == nworld], solve=None) if not df.empty else df
    if rows.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "gpu": rows["gpu"], "body": rows["body"], "solve": rows["solve"],
        "launches_per_step": rows["launches_per_step"],
        "constraint_solve_launches": rows["constraint_solve_launches_per_step"],
        "kernel_ms_per_step": rows["kernel_ms_per_step"], "graph_ms_per_step": rows["graph_ms_per_step"],
        "constraint_solve_ms": rows["constraint_solve_ms_per_step"],
        "constraint_solve_share": rows["constraint_solve_ms_per_step"] / rows["kernel_ms_per_step"].where(
            rows["kernel_ms_per_step"] > 0),
    }).reset_index(drop=True)


def factor_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mass-matrix factor per row: path (sparse/dense), launches and ms per step, share."""
    import json

    out = df[["body", "nworld", "gpu"]].assign(
        factor_path=[json.loads(p).get("factor_path", "") for p in df["params"]])
    for col in ("launches_per_step", "ms_per_step", "share"):
        out[f"factor_{col}"] = df[f"mass_matrix_factor_{col}"].values
    out["kernel_ms_per_step"] = df["kernel_ms_per_step"].values
    return out.reset_index(drop=True)

