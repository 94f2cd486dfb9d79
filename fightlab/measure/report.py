"""Turn a finished training run into result rows (runs/ always, data/ only with `publish`), and
summarise the published ones (published_runs, solve_summary, headline, original_comparison)."""

from __future__ import annotations

import contextlib
import functools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from fightlab import results
from fightlab.config import DEFAULT_TASK, TASK_FIELDS, ConfigError, task_id, to_dict
from fightlab.paths import REPO_ROOT, RUNS


def train_row(trainer, res: dict) -> dict:
    """One data/results/train.csv row (metadata columns + train metrics) for a finished run."""
    cfg = trainer.cfg
    params = to_dict(cfg)
    # the CPU backend's policy on a GPU (TrainConfig.policy_device) is part of the configuration
    # (config_id keeps it apart) and names its GPU; unset it stays out, so the config ids of runs
    # that never had the field do not change
    if params.get("policy_device") is None:
        params.pop("policy_device", None)
    else:
        params["policy_gpu"] = trainer.segments[-1].get("policy_gpu")
    # Trainer.segments holds what every segment ran with, this process's last (read from the
    # launcher's environment when the Trainer started, results.packing_from_env): concurrent =
    # jobs at once on the run's GPU (only concurrent == 1 rows are headlines), mps = those jobs
    # ran under CUDA MPS, gpu_jobs = jobs at once on the host over all its GPUs (they share the
    # CPU cores); older segments' shared_gpu / host_jobs are read as concurrent / gpu_jobs.
    # tree_factor_variant = the single-launch factor kernel ("shared" / "global"; None: MuJoCo
    # Warp's own path). The most packed segment is the run's (mps: any packed segment's); segments
    # of different code or kernels mark the row as mixed (its time to solve is not one setup's,
    # so summaries keep it apart)
    segs = list(trainer.segments)
    params["segments"] = segs
    packs = [results.packing_of(x) for x in segs]
    params["concurrent"] = max(x["concurrent"] for x in packs)
    params["gpu_jobs"] = max(x["gpu_jobs"] for x in packs)
    params["mps"] = any(x["mps"] for x in packs if x["concurrent"] > 1)
    params["tree_factor_variant"] = segs[-1].get("tree_factor_variant")
    params["task"] = task_id(cfg)  # "default", or "custom-…": another task (config.TASK_FIELDS)
    from fightlab.envs.rewards import code_weights

    if weights := code_weights():  # reward terms weighted in code: part of the learner (learner_id)
        params["reward_terms"] = weights
    # the solver as the engine ran it (MuJoCo Warp runs tolerance 1e-8 as 1e-6; the CPU backend's C
    # engine always computes qacc_smooth): `sim.physics.engine_solver`
    if (engine := getattr(trainer.env.unwrapped, "engine_solver", None)) is not None:
        params["physics_engine"] = engine
    if res.get("reference_eval"):  # the reference check of a solve, whole (fightlab.run.reference)
        params["reference_eval"] = res["reference_eval"]
    # `--nworld auto` (measure.sweep.auto_nworld): its ramp and rule, kept with the first segment
    auto = next((x["nworld_auto"] for x in segs if x.get("nworld_auto")), None)
    if auto is not None:
        params["nworld_auto"] = auto
    if len({(x.get("commit"), x.get("tree_factor_variant")) for x in segs}) > 1:
        params["mixed_segments"] = True
    if getattr(trainer, "forked_from", None):  # a continuation of another run's row (fork_if_diverged)
        params["forked_from"] = trainer.forked_from
    # the CPU backend's rows name the CPU model and cores in the gpu column (meta.cpu_label)
    meta = results.run_metadata(body=cfg.body, nworld=cfg.nworld, seed=cfg.seed,
                                params=params, device=cfg.device, backend=cfg.backend,
                                cores=segs[-1].get("cores"))
    meta["run_id"] = trainer.run_id

    def f(x):
        return float("nan") if x is None else float(x)

    row = dict(meta)
    row.update(
        time_to_solve_s=f(res["time_to_solve_s"]) if res["solved"] else float("nan"),
        iterations=int(res["iterations"]), compile_s=f(res["compile_s"]),
        env_steps_per_s=f(res["env_steps_per_s"]), physics_steps_per_s=f(res["physics_steps_per_s"]),
        rollout_s_per_iter=f(res["rollout_s_per_iter"]), update_s_per_iter=f(res["update_s_per_iter"]),
        solved=bool(res["solved"]), final_amplitude=f(res["final_amplitude"]),
        fall_rate=f(res["fall_rate"]), mean_episode_s=f(res["mean_episode_s"]),
        overflow_count=int(res["overflow_count"]), nan_resets=int(res["nan_resets"]),
        host_reads_per_iter=f(res.get("host_reads_per_iter")),
        graph_fallbacks=int(res.get("graph_fallbacks") or 0),
        tracking=f(res.get("tracking")), tracking_survived=f(res.get("tracking_survived")),
        # the reference check of a solve (fightlab.run.reference): empty for a run that did not solve
        reference_passed=ref["passed"] if (ref := res.get("reference_eval")) else None,
        reference_eval_s=f(ref["seconds"]) if ref else float("nan"),
        **{f"reference_{m}_{k}": f(ref[run][m]) if ref else float("nan")
           for run, k in (("dt", "dt"), ("dt/2", "half_dt")) for m in ("fall_rate", "tracking")},
    )
    return row


def fork_if_diverged(trainer, roots) -> str | None:
    """Give a run a new run_id when a train row of its run_id under one of ``roots`` (run
    folders or results roots, ``<root>/data/results/train.csv``) is not an earlier state of this
    run: that row's segments (`Trainer.segments`, each with a unique ``segment_id``) are not this
    run's first segments, or that row went past the iteration this run's next segment started
    from. Two continuations of one checkpoint (either may publish first), or a resume of an older
    checkpoint after the run went on, would otherwise replace each other's row and curve
    (`results.append_row` keeps one row per run_id). The new id goes into this run's checkpoints
    past the split too (``ckpt_*.pt`` of later iterations in its folder), so resuming the fork
    continues the fork; ``trainer.forked_from`` = ``"<old run_id>@<iteration where the two
    parted>"`` (kept in its checkpoints, params ``forked_from``). A run continuing its own row
    (the row's segments a prefix of its own, ended where it went on) keeps its id.

    Returns the old run_id when the run was renamed (one line printed), else None."""
    segs = list(trainer.segments)
    for root in roots:
        path = results.results_path("train", root)
        if not path.is_file():
            continue
        rows = results.read_rows("train", root)
        mine = rows[rows["run_id"].astype(str) == trainer.run_id]
        at = None
        for p, its in zip(mine["params"], mine["iterations"]):
            theirs = list((json.loads(p) if isinstance(p, str) else p).get("segments") or [])
            k = next((i for i, (a, b) in enumerate(zip(theirs, segs)) if a != b), min(len(theirs), len(segs)))
            if k < len(theirs):  # parted where the first differing (or extra) segment of theirs began
                at = int((segs[k] if k < len(segs) else theirs[k]).get("start_iteration", 0))
                break
            if k < len(segs) and int(its) > int(segs[k].get("start_iteration", 0)):
                at = int(segs[k].get("start_iteration", 0))  # theirs went on past where this run did
                break
        if at is None:
            continue
        from fightlab.meta import new_run_id
        from fightlab.run.checkpoint import relabel_checkpoints

        old = trainer.run_id
        trainer.run_id, trainer.forked_from = new_run_id(), f"{old}@{at}"
        relabel_checkpoints(trainer, old, at)  # its own states past the split
        print(f"run {old}: {path} holds a row of {old} that went on another way from iteration {at}: "
              f"this run is run {trainer.run_id} (forked_from {old}@{at}), so neither is replaced", flush=True)
        return old
    return None


def has_train_row(folder, run_id) -> bool:
    """Whether ``folder/data/results/train.csv`` (a run folder's, which `finish_run` writes last)
    holds a row of `run_id`; False when the file is absent."""
    if not results.results_path("train", folder).is_file():
        return False
    return bool((results.read_rows("train", folder)["run_id"].astype(str) == str(run_id)).any())


def finish_run(trainer, res: dict, publish: bool = False, root: Path | None = None) -> dict:
    """Write the run's train row and curve under its run_dir (always) and, with `publish`, under
    `root` (default: the repository) as data/results/train.csv and data/curves/<run_id>.csv.gz,
    then release the run folder (``trainer.close()``).

    One row per run: a later segment of a resumed run replaces the run's row and curve. Per-
    iteration rows of all segments are read back from run_dir/rows.csv, so a resumed run's curve
    is complete. Publishing happens under one cross-process lock (results.publish_lock). Prints a
    one-line summary, then the run folder as the last line (a segment's end: one line with the
    checkpoint to resume). Returns the row (None when the segment ended before the run did).

    Raises:
      ConfigError: `publish` from a run whose plan did not publish (`trainer.publish`: the gate,
        `run.launch.plan_run`, applied the publish rule before the run), before anything is written.
    """
    from fightlab.config import stage_done

    try:
        if res.get("segment_end"):
            # the run goes on with --resume: its row is written when it solves or runs out of
            # iterations, so data/ holds one row per finished run
            print(f"segment ended at iteration {trainer.iteration} after {trainer.elapsed_s:.1f} s of "
                  f"training (amplitude {res['final_amplitude']:.1f}); continue with "
                  f"--resume {Path(trainer.run_dir) / 'latest.pt'}", flush=True)
            return None
        if publish and not getattr(trainer, "publish", False):
            # the publish rule is the gate's (run.launch.plan_run), passed before the run began
            raise ConfigError("publish: this run was planned without publishing; plan it with "
                              "fightlab.run.launch.plan_run(cfg, publish=True) (train --publish), "
                              "which applies the publish rule before any work")
        run_dir = Path(trainer.run_dir)
        rows_csv = run_dir / "rows.csv"
        curve = pd.read_csv(rows_csv) if rows_csv.exists() else pd.DataFrame(res["rows"])
        root = Path(root) if root else REPO_ROOT
        # under the lock from the fork check to the last write: two continuations of one run
        # finishing together cannot both take its row
        with results.publish_lock(root) if publish else contextlib.nullcontext():
            fork_if_diverged(trainer, [run_dir] + ([root] if publish else []))
            row = train_row(trainer, res)
            local = [results.append_row("train", row, run_dir),
                     results.write_curve(row["run_id"], curve, run_dir)]
            trainer.rundir.add(*local)
            if publish:  # the row and its curve land together
                results.append_row("train", row, root)
                results.write_curve(row["run_id"], curve, root, device=trainer.cfg.device,
                                    backend=trainer.cfg.backend)
    finally:
        trainer.close()
    tts = row["time_to_solve_s"]
    print(f"run {row['run_id']} {row['body']} nworld={row['nworld']} seed={row['seed']}: "
          f"solved={row['solved']} time_to_solve_s={'-' if math.isnan(tts) else f'{tts:.1f}'} "
          f"iterations={row['iterations']} compile_s={row['compile_s']:.1f} "
          f"env_steps_per_s={row['env_steps_per_s']:.0f} rollout_s/it={row['rollout_s_per_iter']:.3f} "
          f"update_s/it={row['update_s_per_iter']:.3f} amplitude={row['final_amplitude']:.1f} "
          f"fall_rate={row['fall_rate']:.3f} overflow={row['overflow_count']} nan={row['nan_resets']}"
          + (f" reference={'passed' if row['reference_passed'] else 'failed'} "
             f"reference_eval_s={row['reference_eval_s']:.1f}" if row["reference_passed"] is not None else "")
          + (f" stopped after stage {trainer.cfg.stop_after_stage} (stop_after_stage: a study of its first "
             "stages, not a training to the solve)"
             if not row["solved"] and stage_done(trainer.cfg, trainer.curriculum.stage) else "")
          + ("" if (task := task_id(trainer.cfg)) == DEFAULT_TASK
             else f" task={task} (another task: not a solve of this one)")
          + (" [published]" if publish else ""), flush=True)
    print(f"run folder: {Path(trainer.run_dir)}", flush=True)  # the last line: where everything went
    return row


def eval_row(res: dict, checkpoint, device: str, seed: int, publish: bool = False,
             local_root: Path = RUNS / "eval") -> dict:
    """Print an evaluation (fightlab.run.evaluate.evaluate) and store it as an `evaluate` row under
    runs/eval/ (always) and data/results/ (with `publish`). Returns the row."""
    params = dict(checkpoint=str(checkpoint) if checkpoint else None, run_id=res.get("run_id"),
                  episodes_per_world=res.get("episodes_per_world"),
                  ckpt_iteration=res.get("ckpt_iteration"), ckpt_solved=res.get("ckpt_solved"),
                  physics=res.get("physics"), physics_engine=res.get("physics_engine"))
    row = results.run_metadata(body=res["body"], nworld=res["nworld"], seed=seed, params=params,
                               device=device)
    row.update(zero_action=bool(res["zero_action"]), timestep_s=float(res["timestep"]),
               amplitude=float(res["amplitude"]), episodes=int(res["episodes"]),
               fall_rate=float(res["fall_rate"]), tracking=float(res["tracking"]),
               mean_episode_s=float(res["mean_episode_s"]),
               overflow_count=int(res["overflow_count"]), nan_resets=int(res["nan_resets"]),
               tracking_survived=float(res["tracking_survived"]))
    results.publish_row("evaluate", row, publish, local_root, device)
    print(f"evaluate {res['body']}: {_policy_label(res)}; {_physics_text(res.get('physics'))}; timestep={res['timestep']:g}s "
          f"amplitude={res['amplitude']:g}; {res['nworld']} worlds × {res['seconds_per_world']:g} s "
          f"(--episodes {res['episodes_per_world']:g} per world; a world that falls starts "
          f"a new episode): {res['episodes']} episodes ended in all, fall_rate={res['fall_rate']:.3f} "
          f"(contact {res['contact_falls']}, tilt {res['tilt_falls']}) tracking={res['tracking']:.3f} "
          f"(survived episodes only: {res['tracking_survived']:.3f}) "
          f"mean_episode_s={res['mean_episode_s']:.2f} overflow_resets={res['overflow_count']} "
          f"nan_resets={res['nan_resets']}" + (" [published]" if publish else ""), flush=True)
    return row


def _physics_text(physics) -> str:
    """Which physics an evaluation ran, from its `physics` (`config.training_physics`: the solver
    fields): "physics=reference (Newton 10/20 …)" or "physics=training (Newton 2/4 …)"."""
    from fightlab.config import REFERENCE_SOLVER

    if not isinstance(physics, dict):
        return "physics=unrecorded"
    ref = all(physics.get(k) == v for k, v in REFERENCE_SOLVER.items())
    return f"physics={'reference' if ref else 'training'} ({physics_label({'env': physics})})"


def _policy_label(res: dict) -> str:
    """Which policy an evaluation ran: "zero action" (with the checkpoint whose body and task it
    used, if any: its own policy did not run), or "iteration N (solved / NOT solved)" of the
    checkpoint, so a half-trained policy cannot pass for the solved one."""
    it = res.get("ckpt_iteration")
    if res["zero_action"]:
        return "policy=zero action" + ("" if it is None else
                                       f" (body and task from the checkpoint of iteration {it}; its policy did not run)")
    return f"policy=iteration {it} ({'solved' if res['ckpt_solved'] else 'NOT solved'})"



#: the original study's times to solve [s] (its own bodies and task details):
#: {body: {machine: seconds}} (rtx5090: one RTX 5090; ec2_96vcpu: a 96-vCPU EC2 spot machine);
#: a comparison of orders of magnitude, not a race
ORIGINAL_STUDY_S: dict[str, dict[str, float]] = {
    "simple": {"rtx5090": 185.0, "ec2_96vcpu": 404.0},
    "muscular-fast": {"rtx5090": 377.0, "ec2_96vcpu": 714.0},
}


@functools.lru_cache(maxsize=None)
def _sparse_tree(body: str) -> bool | None:
    """True when ``body`` has a kinematic tree over MuJoCo Warp's dense limit
    (``types.M_BLOCK_DENSE_MAX``, 64 DOF): its mass matrix takes the sparse path, which training
    replaces with fightlab's tree factor (``TrainConfig.tree_factor``). None for an unknown body."""
    import numpy as np
    from mujoco_warp._src.types import M_BLOCK_DENSE_MAX

    from fightlab import bodies

    if body not in bodies.BODIES:
        return None
    m = bodies.build(body)
    return bool(m.nv) and int(np.bincount(m.dof_treeid).max()) > M_BLOCK_DENSE_MAX


def factor_setup(body: str, params: dict) -> str:
    """How a training run factored the mass matrix: "tree factor, <variant>" / "stock factor"
    for bodies with a tree over 64 DOF (params ``tree_factor`` true / false or absent: rows from
    before the switch existed ran the stock sparse factor; ``tree_factor_variant`` "shared" /
    "global", absent on rows from before the shared variant existed, which ran the global one),
    "dense" for the others (dense tile path; ``tree_factor`` changes nothing there),
    "unknown body" for a body fightlab does not build, "cpu backend" for a run on MuJoCo's C
    engine (params ``backend`` "cpu": no MuJoCo Warp factor at all); " (mixed segments)" appended
    when a resumed run's segments ran different commits or kernels (``params.mixed_segments``)."""
    sparse = _sparse_tree(body)
    if sparse is None:
        return "unknown body"
    if params.get("backend") == "cpu":
        return "cpu backend" + (" (mixed segments)" if params.get("mixed_segments") else "")
    if not sparse:
        return "dense" + (" (mixed segments)" if params.get("mixed_segments") else "")
    if params.get("tree_factor") is not True:
        setup = "stock factor"
    else:
        setup = f"tree factor, {params.get('tree_factor_variant') or 'global'}"
    return setup + (" (mixed segments)" if params.get("mixed_segments") else "")


def published_runs(root: Path | None = None, stage_studies: bool = False) -> pd.DataFrame:
    """data/results/train.csv with columns from params added (:func:`fightlab.results.packing_of`,
    so rows from before the batch runner read the same): `concurrent` (jobs at once on the run's
    GPU, from params.concurrent or the older shared_gpu; NaN where neither was recorded), `mps`
    (bool: those jobs ran under CUDA MPS; False where not recorded), `gpu_jobs` (jobs at once on
    the host over all its GPUs, from params.gpu_jobs or the older host_jobs; 1 where not
    recorded), `shared_gpu` / `host_jobs` (the same as concurrent / gpu_jobs, under the older
    names), `setup` (the mass matrix factor path, :func:`factor_setup`), `code` (the training
    code of the row's commit, :func:`code_of`), `config`
    (:func:`config_id`), `task` (:func:`task_of`), `learner` (:func:`learner_id`), `backend`
    (:func:`physics_backend`: "gpu" MuJoCo Warp, "cpu" MuJoCo's C engine), `reference`
    (:func:`reference_verdict`) and `curriculum_solved` (the row's own `solved`). `solved` is True
    only for a curriculum solve whose verdict is one of :data:`SOLVE_VERDICTS`: every summary,
    the headline, Figure 2's iterations, `--nworld auto` and the survey read solves from here.

    `stage_study` marks the runs stopped after a curriculum stage (`TrainConfig.stop_after_stage`):
    they measure their first stages and cannot solve, so they are left out (no summary counts
    them as unsolved trainings, no packing charges them) unless ``stage_studies`` is True, which
    the learner-study tables ask for (:func:`variant_table`, :func:`stage_table`)."""
    df = results.read_rows("train", Path(root) if root else REPO_ROOT)
    params = [json.loads(p) if p else {} for p in df["params"]]
    packs = [results.packing_of(p, default_concurrent=float("nan")) for p in params]
    df["concurrent"] = [x["concurrent"] for x in packs]
    df["mps"] = [x["mps"] for x in packs]
    df["gpu_jobs"] = [x["gpu_jobs"] for x in packs]
    df["shared_gpu"] = df["concurrent"]
    df["host_jobs"] = df["gpu_jobs"]
    df["setup"] = [factor_setup(b, p) for b, p in zip(df["body"], params)]
    df["config"] = [config_id(p) for p in params]
    df["task"] = [task_of(p) for p in params]
    df["learner"] = [learner_id(p) for p in params]
    df["code"] = [code_of(c) for c in df["commit"]]
    df["backend"] = [physics_backend(p) for p in params]
    passed = df["reference_passed"] if "reference_passed" in df else pd.Series([None] * len(df), index=df.index)
    df["reference"] = [reference_verdict(x, p) for x, p in zip(passed, params)]
    df["curriculum_solved"] = df["solved"] == True  # noqa: E712
    df["solved"] = df["curriculum_solved"] & df["reference"].isin(SOLVE_VERDICTS)
    df["stage_study"] = pd.Series([p.get("stop_after_stage") is not None for p in params], index=df.index, dtype=bool)
    return df if stage_studies else df.loc[~df["stage_study"]].reset_index(drop=True)


#: `published_runs`' `reference` column: a row's standing against the reference check
#: (`fightlab.run.reference`): its check passed or failed; no check, trained in the reference
#: physics itself (every row from before the check: their solves were judged in it at the task's
#: timestep); no check in other physics (never a solve)
REFERENCE_VERDICTS = ("passed", "failed", "trained in reference", "unchecked")

#: the verdicts whose solves count (`published_runs` keeps `solved` True only for these)
SOLVE_VERDICTS = ("passed", "trained in reference")


def reference_verdict(passed, params: dict) -> str:
    """A train row's :data:`REFERENCE_VERDICTS` entry from its `reference_passed` cell (True /
    False as written, or as read back: "True", 1.0; empty or NaN: no check) and its params
    (the training physics: `config.training_physics` of its env fields, a field it does not
    store read as `config.IMPLIED_FIELDS` says)."""
    from fightlab.config import REFERENCE_SOLVER

    if isinstance(passed, str):
        passed = {"true": True, "false": False}.get(passed.strip().lower())
    elif isinstance(passed, (int, float, np.bool_)) and not (isinstance(passed, float) and math.isnan(passed)):
        passed = bool(passed)
    else:
        passed = passed if isinstance(passed, bool) else None
    if passed is not None:
        return "passed" if passed else "failed"
    env = params.get("env") or {}
    same = all(env.get(k, v) == v for k, v in REFERENCE_SOLVER.items())
    return "trained in reference" if same else "unchecked"


def physics_backend(params: dict) -> str:
    """A row's physics backend from its params: "gpu" (MuJoCo Warp, on any device) or "cpu"
    (MuJoCo's C engine): a train row's last segment's (`sim.cpu`'s backend record),
    else params.backend; rows from before the CPU backend name none and are "gpu"."""
    seg = (params.get("segments") or [{}])[-1]
    return str(seg.get("backend") or params.get("backend") or "gpu")


def cpu_baseline_runs(runs: pd.DataFrame, log=None) -> pd.DataFrame:
    """The CPU baseline's train rows (:func:`published_runs`): CPU-backend rows whose policy ran on
    the CPU too, as on the original's GPU-less machine. A CPU-backend row with its policy on a GPU
    (`TrainConfig.policy_device`) ran on a CPU + GPU machine: left out, and counted through
    ``log`` (a callable taking one line) when given."""
    cpu = runs[runs["backend"] == "cpu"]
    on_gpu = pd.Series([str(json.loads(p).get("policy_device") or "").startswith("cuda") if p else False
                        for p in cpu["params"]], index=cpu.index, dtype=bool)
    if on_gpu.any() and log is not None:
        log(f"{int(on_gpu.sum())} CPU-backend train row(s) with the policy on a GPU left out "
            "(a CPU + GPU machine: not the CPU baseline, and not priced)")
    return cpu[~on_gpu]


def cpu_headline(runs: pd.DataFrame, log=None) -> pd.DataFrame:
    """The CPU baseline's headline per body: :func:`headline` with ``backend="cpu"`` over
    :func:`cpu_baseline_runs` (its index: SUMMARY_KEYS). Empty without a CPU-baseline run."""
    base = cpu_baseline_runs(runs, log)
    return headline(solve_summary(base), backend="cpu") if not base.empty else pd.DataFrame()


def task_of(params: dict) -> str:
    """A train row's task id (:func:`fightlab.config.task_id`): params.task where the row has it,
    else from the Fixed fields the row's params store (rows from before the task id; a field a
    row does not store is taken as the default), or ``"unknown"`` when a stored value does not
    fit its field (such a row never counts as a solve of the task)."""
    if params.get("task"):
        return str(params["task"])
    import dataclasses

    from fightlab.config import EnvConfig, PPOConfig, TrainConfig

    parts = {"": {}, "env": {}, "ppo": {}}
    for name in TASK_FIELDS:
        part, key = name.split(".", 1) if "." in name else ("", name)
        src = params.get(part) or {} if part else params
        if isinstance(src, dict) and key in src:
            v = src[key]
            parts[part][key] = tuple(v) if isinstance(v, list) else v
    try:
        cfg = TrainConfig(**parts[""], env=dataclasses.replace(EnvConfig(), **parts["env"]),
                          ppo=dataclasses.replace(PPOConfig(), **parts["ppo"]))
    except (TypeError, ValueError):
        return "unknown"
    return task_id(cfg)


def stage_iterations(curve: pd.DataFrame) -> pd.Series:
    """Iterations a run spent in each curriculum stage, from its per-iteration curve (columns
    ``stage``, ``event``; rows.csv or data/curves/<run_id>.csv.gz): index the stage (0 = a 0.1), values
    the counts (int). The row of a widening belongs to the stage it left; the solving row to the
    last stage."""
    stage = pd.to_numeric(curve["stage"]).astype(int) - (curve["event"] == "widen").astype(int)
    return stage.value_counts().sort_index().rename("iterations").rename_axis("stage")


def _effective_ppo(ppo: dict) -> dict:
    """A row's PPO fields less those that do not act: `desired_kl_per_action` when `desired_kl`
    is set (PPOConfig.kl_target), so a run that sets the old fixed target hashes as the older
    rows that stored no per-action field."""
    from fightlab.config import idle_ppo_fields

    idle = idle_ppo_fields(ppo)
    return {k: v for k, v in ppo.items() if k not in idle}


def learner_id(params: dict) -> str:
    """8 hex characters naming a run's learner: a hash of its PPOConfig and of the EnvConfig
    fields that are not the task's (reward weights, action scale; ``config.TASK_FIELDS`` says
    which are), and of the reward terms weighted in code (params ``reward_terms``). Runs that differ only in how they were launched (graphs, factor path, seed,
    nworld) or in code share it; a changed reward weight or learning rate does not."""
    import hashlib

    from fightlab.config import canonical_params

    params = canonical_params(params)
    env = {k: v for k, v in (params.get("env") or {}).items() if f"env.{k}" not in TASK_FIELDS}
    key = dict(ppo=_effective_ppo(params.get("ppo") or {}), env=env)
    if params.get("reward_terms"):  # terms weighted in code (envs.rewards.code_weights)
        key["reward_terms"] = params["reward_terms"]
    key = json.dumps(key, sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()[:8]


def learner_diff(params: dict, body: str | None = None) -> list[tuple[str, object]]:
    """The learner fields of a run's params (PPOConfig, and EnvConfig fields outside
    ``config.TASK_FIELDS``) that differ from today's defaults for its body (``body``, else params
    ``body``, else TrainConfig's; `config.body_ppo`), as sorted ``("ppo.init_std", 0.2)``
    pairs (values as the row stores them; [] when none differ). A field a row does not store
    reads as its default, or as `config.IMPLIED_FIELDS` says (the solver fields of rows from
    before them: the reference solver); list-valued fields compare as tuples."""
    from fightlab.config import TrainConfig

    def norm(x):
        return tuple(x) if isinstance(x, (list, tuple)) else x

    from fightlab.config import IMPLIED_FIELDS

    body = body if isinstance(body, str) else params.get("body")
    ref = to_dict(TrainConfig(body=body if isinstance(body, str) else TrainConfig.body))
    out = []
    for part in ("ppo", "env"):
        have = params.get(part) or {}
        if part == "ppo":
            have = _effective_ppo(have)
        for k, d in sorted(ref[part].items()):
            name = f"{part}.{k}"
            if name in TASK_FIELDS or (k not in have and name not in IMPLIED_FIELDS):
                continue
            v = have[k] if k in have else IMPLIED_FIELDS[name]  # a field older rows lack
            if norm(v) != norm(d):
                out.append((f"{part}.{k}", v))
    return out


def learner_changes(params: dict, body: str | None = None) -> str:
    """:func:`learner_diff` as text, ``"ppo.init_std=0.2, env.w_pose=2"``; the training physics,
    when any of its solver fields differs, as one :func:`physics_label` at the end; ``"defaults"``
    when no learner field differs from today's defaults."""
    diff = learner_diff(params, body)
    out = [f"{k}={v}" for k, v in diff if not k.startswith("env.solver_")]
    if len(out) < len(diff):
        out.append(physics_label(params))
    return ", ".join(out) or "defaults"


def physics_label(params: dict) -> str:
    """A row's training physics in a few words, ``"Newton 10/20 with qacc_smooth"`` (tolerances
    added when they are not the defaults', ", explicit damping" without eulerdamp), from its env
    fields (a field it does not store read as `config.IMPLIED_FIELDS` says, else as today's
    default)."""
    from fightlab.config import IMPLIED_FIELDS, EnvConfig

    env, dflt = params.get("env") or {}, EnvConfig()

    def get(k):
        return env[k] if k in env else IMPLIED_FIELDS.get(f"env.{k}", getattr(dflt, k))

    text = (f"Newton {get('solver_iterations')}/{get('solver_ls_iterations')} "
            f"{'with' if get('solver_qacc_smooth') else 'without'} qacc_smooth")
    tol = (get("solver_tolerance"), get("solver_ls_tolerance"))
    if tol != (dflt.solver_tolerance, dflt.solver_ls_tolerance):
        text += f" tol {tol[0]:g}/{tol[1]:g}"
    if not get("solver_eulerdamp"):
        text += ", explicit damping"
    return text


def pick_variant(runs: pd.DataFrame, margin: float = 0.05, metric: str = "iterations") -> pd.DataFrame:
    """A learner study's decision rule (bench/NOTES.md), per body of ``runs``
    (:func:`published_runs` rows of one study, packed or not; MuJoCo Warp's): among the learners whose every run
    solved the task with a known iteration count, over ≥ 2 distinct seeds, the lowest mean
    iterations to solve wins (a tie keeps the defaults), and replaces today's defaults only if
    it beats their mean by more than ``margin`` (default 5 %, about the seed spread of the
    session-7 solves); otherwise the defaults stay.

    ``metric="stage0"`` is the same rule over the first stage's iterations, for a study of runs
    stopped after stage 0 (``published_runs(..., stage_studies=True)`` rows with a ``stage0``
    column, :func:`with_stage0`): eligible are the learners whose every run ended stage 0
    (stage0 > 0) over ≥ 2 distinct seeds.

    Returns:
      one row per body: ``defaults_mean`` and ``best_mean`` (iterations), ``best`` (its
      :func:`learner_changes`), ``adopt`` (bool), ``sets`` (``key=value`` for ``--set``, values
      as JSON, that run the chosen learner under today's defaults: list of str, [] when the
      defaults stay) and ``variants`` (changes → mean iterations, over the eligible learners).
    Raises:
      ConfigError: ``margin`` not a number in [0, 1); ``metric`` not "iterations" or
        "stage0"; ``runs`` without published_runs' columns (and ``stage0`` for that metric) or
        without a run of the task; a body whose study has no eligible learner of today's
        defaults (nothing to compare against).
    """
    import numbers

    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < 1:
        raise ConfigError(f"margin must be a fraction in [0, 1), got {margin!r}")
    if metric not in ("iterations", "stage0"):
        raise ConfigError(f"metric must be 'iterations' or 'stage0', got {metric!r}")
    need = {"run_id", "body", "seed", "solved", "iterations", "params", "task", "backend"} | (
        {"stage0"} if metric == "stage0" else set())
    if not need <= set(runs.columns):
        raise ConfigError(f"pick_variant needs published_runs rows (columns {sorted(need)}), "
                          f"missing {sorted(need - set(runs.columns))}")
    tasks = sorted(set(map(str, runs["task"])))
    runs = runs[(runs["task"] == DEFAULT_TASK) & (runs["backend"] == "gpu")]  # MuJoCo Warp trainings
    if runs.empty:
        raise ConfigError(f"pick_variant: no runs of task {DEFAULT_TASK!r} (tasks seen: {tasks or 'none'})")
    out = []
    for body, g in runs.groupby("body", sort=True):
        params = {r.run_id: json.loads(r.params or "{}") for r in g.itertuples()}
        g = g.assign(changes=[learner_changes(params[i], body) for i in g["run_id"]])
        means, sets = {}, {}
        for changes, v in g.groupby("changes", sort=False):
            # eligible: every run solved (or ended stage 0) with a known count, over >= 2 distinct seeds
            counts = pd.to_numeric(v[metric], errors="coerce")
            done = (counts > 0).all() if metric == "stage0" else (v["solved"] == True).all()  # noqa: E712
            if v["seed"].nunique() >= 2 and done and np.isfinite(counts.to_numpy(dtype=float)).all():
                means[changes] = float(counts.mean())
                sets[changes] = [f"{k}={json.dumps(x)}" for k, x in learner_diff(params[v["run_id"].iloc[0]], body)]
        if "defaults" not in means:
            what = "seeds that ended stage 0" if metric == "stage0" else "solved seeds"
            raise ConfigError(f"pick_variant: body {body!r} has no learner of today's defaults with "
                              f">= 2 {what} (have {sorted(means) or 'none'})")
        best = min(means, key=lambda k: (means[k], k != "defaults"))  # a tie keeps the defaults
        adopt = best != "defaults" and means[best] < (1 - margin) * means["defaults"]
        out.append(dict(body=body, defaults_mean=means["defaults"], best=best, best_mean=means[best],
                        adopt=adopt, sets=sets[best] if adopt else [], variants=means))
    return pd.DataFrame(out, columns=["body", "defaults_mean", "best", "best_mean", "adopt", "sets", "variants"])


def with_stage0(runs: pd.DataFrame, root: Path | None = None) -> pd.DataFrame:
    """``runs`` (:func:`published_runs`, ``stage_studies=True`` for runs stopped after stage 0)
    with a ``stage0`` column: the first stage's iterations (:func:`run_stages`, curves under
    ``root``, default the repository), 0 for a run without an ended stage 0 or its curve."""
    if "run_id" not in runs:
        raise ConfigError(f"with_stage0 needs published_runs rows (a run_id column), got columns {list(runs.columns)}")
    per_run = run_stages(runs, root) if not runs.empty else pd.DataFrame(columns=["stage0"])
    s0 = per_run["stage0"] if len(per_run) else pd.Series(dtype=float)
    return runs.assign(stage0=[float(s0.get(i, 0)) for i in runs["run_id"]])


def learner_labels(runs: pd.DataFrame) -> dict:
    """(body, learner id) (:func:`learner_id`) → :func:`learner_changes` of its first row in
    ``runs`` (:func:`published_runs`): a legend that says what a learner changed from its body's
    defaults (one learner reads differently on bodies whose defaults differ, `config.BODY_PPO`)."""
    out: dict = {}
    for r in runs.itertuples():
        if (r.body, r.learner) not in out:
            out[(r.body, r.learner)] = learner_changes(json.loads(r.params or "{}"), r.body)
    return out


def variant_table(runs: pd.DataFrame, root: Path | None = None) -> pd.DataFrame:
    """A learner study's table: per (body, learner) over the runs of the task in ``runs``
    (:func:`published_runs`, with ``stage_studies=True`` to count the runs stopped after stage
    0) that solved or ended stage 0 by `stop_after_stage`, packed or solo (packing changes wall
    time, not iterations), that have curves: ``changes`` (:func:`learner_changes`), ``n`` runs,
    ``n_solved``, ``seeds``, median / min / max ``stage0`` iterations (the first stage, a = 0.1,
    over all n) and median / min / max ``iterations`` to solve (over the solved runs; NaN
    without one). Sorted by body, then median iterations, then median stage 0. Empty (same
    columns) without such runs."""
    cols = ["body", "learner", "changes", "n", "n_solved", "seeds", "stage0_median", "stage0_min", "stage0_max",
            "iterations_median", "iterations_min", "iterations_max"]
    per_run = run_stages(runs, root)
    per_run = per_run[per_run["stage0"] > 0] if not per_run.empty else per_run
    if per_run.empty:
        return pd.DataFrame(columns=cols)
    changes = {r.run_id: learner_changes(json.loads(r.params or "{}"), r.body) for r in runs.itertuples()}
    per_run = per_run.assign(changes=[changes.get(i, "") for i in per_run.index])
    rows = []
    for (body, learner), g in per_run.groupby(["body", "learner"], sort=False):
        its = g["iterations"].dropna()
        rows.append(dict(body=body, learner=learner, changes=g["changes"].iloc[0], n=len(g), n_solved=len(its),
                         seeds=", ".join(str(x) for x in sorted(g["seed"])),
                         stage0_median=g["stage0"].median(), stage0_min=g["stage0"].min(),
                         stage0_max=g["stage0"].max(), iterations_median=its.median() if len(its) else math.nan,
                         iterations_min=its.min() if len(its) else math.nan,
                         iterations_max=its.max() if len(its) else math.nan))
    return pd.DataFrame(rows, columns=cols).sort_values(["body", "iterations_median", "stage0_median"]) \
        .reset_index(drop=True)


def run_stages(runs: pd.DataFrame, root: Path | None = None) -> pd.DataFrame:
    """Per run of the task with a curve that solved or ended a stage by `stop_after_stage`,
    packed or solo (:func:`stage_table` with ``packed=True``): body, learner, nworld, seed,
    solved, iterations (to solve, summed over the stages; NaN for a run that did not solve) and
    stage0 (the first stage's; 0 where the curve has none), indexed by run_id. Empty without
    such runs."""
    t = stage_table(runs, root, packed=True) if not runs.empty else pd.DataFrame()
    if t.empty:
        return pd.DataFrame(columns=["body", "learner", "nworld", "seed", "solved", "iterations", "stage0"])
    per_run = t.groupby("run_id").agg(body=("body", "first"), learner=("learner", "first"),
                                      nworld=("nworld", "first"), seed=("seed", "first"),
                                      solved=("solved", "first"), iterations=("iterations", "sum"))
    per_run["iterations"] = per_run["iterations"].where(per_run["solved"].astype(bool)).astype(float)
    per_run["stage0"] = t[t["stage"] == 0].set_index("run_id")["iterations"].reindex(per_run.index).fillna(0)
    return per_run


def stage_table(runs: pd.DataFrame, root: Path | None = None, packed: bool = False) -> pd.DataFrame:
    """Iterations per curriculum stage of every solo run of the task itself in ``runs``
    (:func:`published_runs`) that solved, or that ended stages by `stop_after_stage` (a
    ``stage_study`` row: only the stages it ended, each by a widening), and has its curve under
    ``root`` (default: the repository), one row per (run, stage): run_id, body, learner
    (:func:`learner_id`: old and new learner defaults are different groups), commit, nworld,
    seed, concurrent, solved, stage, amplitude, iterations. Curves without the ``stage`` and
    ``event`` columns are left out. ``packed=True`` keeps packed runs too (a learner study packs
    its variants: packing changes wall time, not iterations). MuJoCo Warp trainings only
    (`backend` "gpu"): the CPU backend's solves are its own headline's."""
    from fightlab.config import TrainConfig

    root = Path(root) if root else REPO_ROOT
    solo = (runs["concurrent"] == 1) if not packed else pd.Series(True, index=runs.index)
    study = runs["stage_study"] == True if "stage_study" in runs else pd.Series(False, index=runs.index)  # noqa: E712
    keep = runs[((runs["solved"] == True) | study) & solo  # noqa: E712
                & (runs["task"] == DEFAULT_TASK) & (runs["backend"] == "gpu")]
    amps = TrainConfig().curriculum_stages
    rows = []
    for r in keep.itertuples():
        if not results.curve_path(r.run_id, root).exists():
            continue
        curve = results.read_curve(r.run_id, root)
        if not {"stage", "event"} <= set(curve.columns):
            continue  # a curve without the curriculum columns (not a training's rows.csv)
        if curve.empty:
            raise results.MalformedRowError(f"{results.curve_path(r.run_id, root)}: the curve has a header and "
                                            "no rows (its run's row says it trained)")
        solved = r.solved == True  # noqa: E712
        ended = len(amps) if solved else int((curve["event"] == "widen").sum())  # stages it finished
        for stage, n in stage_iterations(curve).items():
            if stage >= ended:
                continue  # the stage a stopped run was in: not ended, not a measurement
            rows.append(dict(run_id=r.run_id, body=r.body, learner=r.learner, commit=r.commit,
                             nworld=int(r.nworld), seed=r.seed,
                             concurrent=int(r.concurrent) if r.concurrent == r.concurrent else None,  # NaN: unrecorded
                             solved=bool(solved), stage=int(stage),
                             amplitude=amps[stage] if 0 <= stage < len(amps) else float("nan"),
                             iterations=int(n)))
    return pd.DataFrame(rows, columns=["run_id", "body", "learner", "commit", "nworld", "seed", "concurrent",
                                       "solved", "stage", "amplitude", "iterations"])


#: params that do not change what a run measures (where it ran, its seed, how it was launched)
#: and so do not split groups; the factor path is the separate `setup` key
VOLATILE_PARAMS = ("seed", "run_dir", "device", "resume", "segment_s", "checkpoint_every",
                   "max_iterations", "shared_gpu", "shared_gpu_note", "host_jobs", "host_jobs_note",
                   "concurrent", "mps", "gpu_jobs", "tree_factor", "tree_factor_variant", "segments",
                   "task", "nworld_auto", "reference_nworld", "reference_eval", "physics_engine",
                   "solver_loop", "stop_after_stage")


def config_id(params: dict) -> str:
    """8 hex characters identifying a run's configuration: a hash of its params without
    :data:`VOLATILE_PARAMS` (so seeds pool, but a changed reward weight, learning rate or nworld
    does not). The factor switch and the per-segment record (commit, kernel variant, sharing) are
    volatile here because :data:`SUMMARY_KEYS` keeps them apart already (``setup``, ``code``),
    so runs with and without the tree factor share a config id and can be compared."""
    import hashlib

    from fightlab.config import canonical_params

    keep = {k: v for k, v in canonical_params(params).items() if k not in VOLATILE_PARAMS}
    return hashlib.sha1(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:8]


#: solve_summary's grouping: rows of different bodies, factor paths, training code (``code``:
#: `fightlab.meta.training_code_id` of the row's commit, else the commit itself), GPUs, world
#: counts, configurations or tasks are never pooled
SUMMARY_KEYS = ("body", "setup", "code", "gpu", "nworld", "config", "task")


def code_of(commit) -> str:
    """A train row's ``code`` key: `fightlab.meta.training_code_id` of its commit (commits whose
    training code is identical share it), else ``"commit <commit>"`` (never pooled with another
    commit: no git history here, a dirty or unknown commit, a synthetic row)."""
    from fightlab.meta import training_code_id

    return training_code_id(str(commit)) or f"commit {commit}"


def with_code(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``code`` column (:func:`code_of` of each row's commit) where it has none."""
    return df if "code" in df.columns else df.assign(code=[code_of(c) for c in df["commit"]])


def commits_by_time(g: pd.DataFrame) -> pd.Series:
    """The commits of rows ``g``, oldest run first (row order without a ``time`` column)."""
    if "time" in g:
        g = g.assign(_w=pd.to_datetime(g["time"], utc=True, format="ISO8601", errors="coerce")).sort_values(
            "_w", kind="stable")
    return g["commit"].astype(str)


def commits_in(g: pd.DataFrame, sep: str = " ") -> str:
    """The commits of rows ``g``, oldest run first, once each, joined by ``sep``."""
    return sep.join(dict.fromkeys(commits_by_time(g)))


def _solve_times(runs: pd.DataFrame) -> dict:
    """Median / min / max time to solve (s) and median iterations of ``runs`` (NaN when empty):
    the columns :func:`solve_summary` and :func:`factor_comparison` share."""
    t = runs["time_to_solve_s"]
    return dict(time_to_solve_median_s=t.median(), time_to_solve_min_s=t.min(),
                time_to_solve_max_s=t.max(), iterations_median=runs["iterations"].median())


def solve_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per :data:`SUMMARY_KEYS` group (body, factor setup, training code, GPU, nworld, config
    id, task: rows that differ in any of these are never pooled into one median; commits that
    changed no training code pool, and ``commits`` lists them), over solved runs that
    had the GPU to themselves (concurrent == 1): number of solo runs (n_solo, one per seed in
    practice), ``commits`` (of the group's rows, oldest first) and ``commit`` (the newest solo
    run's, else the newest run's), median / min / max time to solve (s), median / min / max iterations, median
    compile seconds, env steps/s, rollout and update seconds per iteration, the most GPU jobs
    that ran on the host beside any of them (gpu_jobs, and its older name host_jobs), and the
    newest solo run's time (latest; the newest run of any kind where there is no solo run), and
    ``learner_changes`` (:func:`learner_changes` of the group's first row: "defaults" for today's
    learner and training physics of its body). Runs
    that shared the GPU, packed with or without MPS (or did not solve), are counted apart
    (n_shared, n_unsolved) and not summarised: their times are :func:`packed_throughput`'s.

    Args:
      df: :func:`published_runs` (needs its `setup`, `config`, `concurrent` and `gpu_jobs`
        columns).
    Returns:
      a DataFrame indexed by :data:`SUMMARY_KEYS`, sorted by body and newest run last.
    """
    df = with_code(df)
    rows = []
    for keys, g in df.groupby(list(SUMMARY_KEYS), sort=False):
        solved = g["solved"] == True  # noqa: E712
        alone = g["concurrent"] == 1
        solo = g[solved & alone]
        rows.append(dict(zip(SUMMARY_KEYS, keys), commits=commits_in(g),
                         commit=commits_by_time(solo if len(solo) else g).iloc[-1],
                         n_solo=len(solo),
                         n_shared=int((~alone).sum()),
                         n_unsolved=int((~solved & alone).sum()),
                         **_solve_times(solo), iterations_min=solo["iterations"].min(), iterations_max=solo["iterations"].max(),
                         compile_s_median=solo["compile_s"].median(),
                         env_steps_per_s_median=solo["env_steps_per_s"].median(),
                         rollout_s_per_iter=solo["rollout_s_per_iter"].median(),
                         update_s_per_iter=solo["update_s_per_iter"].median(),
                         gpu_jobs=solo["gpu_jobs"].max() if len(solo) else float("nan"),
                         latest=solo["time"].max() if len(solo) else g["time"].max(),
                         learner_changes=learner_changes(json.loads(g["params"].iloc[0] or "{}"), keys[0])))
    if not rows:
        return pd.DataFrame(columns=[*SUMMARY_KEYS, "n_solo"]).set_index(list(SUMMARY_KEYS))
    out = pd.DataFrame(rows).sort_values(["body", "latest"], kind="stable")
    out["gpu_jobs"] = out["gpu_jobs"].astype("Int64")
    out["host_jobs"] = out["gpu_jobs"]  # the older name
    return out.set_index(list(SUMMARY_KEYS))


def headline(summary: pd.DataFrame, backend: str = "gpu") -> pd.DataFrame:
    """The headline group per body from :func:`solve_summary`: the most solo solved seeds, and
    among groups with as many, the newest commit (latest run). Bodies without a solo solved run
    have no headline, and only runs of the task itself count (task :data:`DEFAULT_TASK`: a run that
    changed a Fixed field solved another task). On MuJoCo Warp only runs of today's learner and
    training physics count (``learner_changes`` "defaults": what `fightlab train` runs; a
    candidate learner's solo seeds are a study's, not the headline) (``backend="gpu"``, the default; a
    CPU-backend group, its `gpu` naming a CPU, `fightlab.meta.is_cpu_label`, is the CPU baseline:
    `python -m fightlab compare-backends` compares it) or, with ``backend="cpu"``, among those
    CPU-backend groups only (the CPU baseline's own headline). Returns the chosen rows (same index).

    Raises:
      ConfigError: a backend other than "gpu" / "cpu"."""
    from fightlab.meta import is_cpu_label

    if backend not in ("gpu", "cpu"):
        raise ConfigError(f"headline backend must be 'gpu' or 'cpu', got {backend!r}")
    s = summary[summary["n_solo"] > 0]
    s = s[s.index.get_level_values("task") == DEFAULT_TASK]
    s = s[[is_cpu_label(g) == (backend == "cpu") for g in s.index.get_level_values("gpu")]]
    if backend == "gpu" and "learner_changes" in s:
        s = s[s["learner_changes"] == "defaults"]
    if s.empty:
        return s
    order = s.reset_index().sort_values(["body", "n_solo", "latest"], ascending=[True, False, False],
                                        kind="stable")
    return order.groupby("body", sort=False).head(1).set_index(list(SUMMARY_KEYS))


def no_headline_note(body: str, train_rows: pd.DataFrame) -> str:
    """Why ``body`` has no headline in ``train_rows`` (`report.published_runs`): no solo solve of
    the task on MuJoCo Warp at all, or only of learners other than today's default."""
    r = train_rows
    if not r.empty:
        keep = (r["body"] == body) & (r["solved"] == True) & (r["concurrent"] == 1)  # noqa: E712
        for col, want in (("task", DEFAULT_TASK), ("backend", "gpu")):  # where the table has them
            if col in r:
                keep &= r[col] == want
        r = r[keep]
    if r.empty:
        return f"no committed solo solved run of {body} in data/results/train.csv"
    other = sum(learner_changes(json.loads(p or "{}"), body) != "defaults" for p in r["params"])
    return (f"no committed solo solved run of {body}'s default learner in data/results/train.csv "
            f"({other} solo solves of other learners: the defaults changed after them)")


def original_comparison(summary: pd.DataFrame) -> pd.DataFrame:
    """Headline median time to solve per body (:func:`headline`) next to the original study's
    (:data:`ORIGINAL_STUDY_S`): the original's seconds (``original_<machine>_s``) and the ratio
    original / ours (``<machine>_over_ours``; above 1: ours solved faster). Different bodies,
    task details and cards: an order of magnitude, not a race."""
    rows = []
    for keys, r in headline(summary).iterrows():
        row = dict(zip(SUMMARY_KEYS, keys), n_solo=int(r["n_solo"]),
                   time_to_solve_median_s=r["time_to_solve_median_s"])
        for machine, s in ORIGINAL_STUDY_S.get(row["body"], {}).items():
            row[f"original_{machine}_s"] = s
            row[f"{machine}_over_ours"] = s / r["time_to_solve_median_s"]
        rows.append(row)
    return pd.DataFrame(rows)


#: the sparse-tree setups compared by :func:`factor_comparison`, the reference first
FACTOR_SETUPS = ("stock factor", "tree factor, global", "tree factor, shared")


def factor_comparison(df: pd.DataFrame, body: str = "muscular-fast") -> pd.DataFrame:
    """Time to solve ``body`` with MuJoCo Warp's per-level factor vs fightlab's tree factor
    (the question "with vs without the kernel"), one row per setup of :data:`FACTOR_SETUPS`.

    Unlike :func:`solve_summary` this pools runs across commits (the ``commits`` column lists
    them, with the ``seeds``), because a kernel-off seed and a kernel-on seed are rarely run from
    the same commit; it never pools GPUs, world counts or configurations, and takes one run per
    (setup, seed): the newest. Only solo solved runs (concurrent == 1) count. The (gpu, nworld,
    config) group compared is the one that has a stock run and a tree-factor run, then one with a
    stock run, then the most setups, then the most runs (ties: the group whose first run comes
    first in the file); times are compared as instants (``time`` parsed with its UTC offset).
    Whether the commits pooled differ in anything that changes the stock path is for the reader
    to check (notebook 06 says what was checked for the committed rows).

    Args:
      df: :func:`published_runs`.
      body: a fightlab body whose tree takes the sparse path (muscular-fast).
    Returns:
      DataFrame indexed by ``setup``: n, seeds, commits, gpu, nworld, config, host_jobs (the
      most GPU jobs on the host beside any of the runs), median / min / max time to solve (s),
      median iterations, median rollout / update / total seconds per iteration, and
      ``stock_over_this`` (stock's median time to solve / this setup's: above 1, faster than
      stock) and ``stock_over_this_per_iter`` (the same for seconds per iteration). Empty when
      ``body`` has no solo solved run.
    Raises:
      ValueError: ``body`` is not a fightlab body, or has no tree over 64 DOF (names the bodies
        that have one).
    """
    from fightlab import bodies

    sparse = _sparse_tree(body)
    if sparse is None:
        raise ValueError(f"factor_comparison: unknown body {body!r}; bodies: {sorted(bodies.BODIES)}")
    if not sparse:
        have = [b for b in bodies.BODIES if _sparse_tree(b)]
        raise ValueError(f"factor_comparison: body {body!r} has no tree over 64 DOF, so no factor "
                         f"to compare; bodies that have one: {have}")
    key = ["gpu", "nworld", "config"]
    runs = df[(df["body"] == body) & (df["solved"] == True) & (df["concurrent"] == 1)  # noqa: E712
              & df["setup"].isin(FACTOR_SETUPS) & (df["task"] == DEFAULT_TASK)]
    if runs.empty:
        return pd.DataFrame(columns=["n"]).rename_axis("setup")
    when = pd.to_datetime(runs["time"], utc=True, format="ISO8601")
    runs = runs.assign(_when=when).sort_values("_when", kind="stable").drop_duplicates(
        ["setup", "seed", *key], keep="last").drop(columns="_when").sort_index()
    rank = runs.groupby(key, sort=False)["setup"].agg(
        has_stock=lambda s: bool((s == FACTOR_SETUPS[0]).any()), n_setups="nunique", n="size")
    rank["comparable"] = rank["has_stock"] & (rank["n_setups"] >= 2)
    group = rank.sort_values(["comparable", "has_stock", "n_setups", "n"], ascending=False,
                             kind="stable").index[0]
    runs = runs[(runs[key] == pd.Series(group, index=key)).all(axis=1)]
    rows = []
    for setup in FACTOR_SETUPS:
        g = runs[runs["setup"] == setup].sort_values("seed")
        if g.empty:
            continue
        per_it = g["rollout_s_per_iter"] + g["update_s_per_iter"]
        host_jobs = pd.to_numeric(g["host_jobs"], errors="coerce").max()
        rows.append(dict(setup=setup, n=len(g), seeds=" ".join(str(s) for s in g["seed"]),
                         commits=" ".join(dict.fromkeys(g["commit"])), gpu=group[0],
                         nworld=int(group[1]), config=group[2],
                         host_jobs=int(host_jobs) if pd.notna(host_jobs) else pd.NA,
                         **_solve_times(g), rollout_s_per_iter=g["rollout_s_per_iter"].median(),
                         update_s_per_iter=g["update_s_per_iter"].median(),
                         s_per_iter=per_it.median()))
    out = pd.DataFrame(rows).set_index("setup")
    if FACTOR_SETUPS[0] in out.index:
        ref = out.loc[FACTOR_SETUPS[0]]
        out["stock_over_this"] = ref["time_to_solve_median_s"] / out["time_to_solve_median_s"]
        out["stock_over_this_per_iter"] = ref["s_per_iter"] / out["s_per_iter"]
    return out


#: packed_throughput's grouping: what a run measured (SUMMARY_KEYS) and how it was packed
PACKING_KEYS = (*SUMMARY_KEYS, "concurrent", "mps")


def run_wall_s(df: pd.DataFrame) -> pd.Series:
    """Seconds of wall clock each train row's run held its GPU slot: ``time_to_solve_s`` for a
    solved run (a run stops when it solves), else ``iterations × (rollout_s_per_iter +
    update_s_per_iter)`` (the run's training time at its median iteration time), plus
    ``compile_s`` (warm-up and capture) in both cases; NaN where a column is missing."""
    per_iter = df["iterations"] * (df["rollout_s_per_iter"] + df["update_s_per_iter"])
    solved = df["solved"] == True  # noqa: E712
    return df["time_to_solve_s"].where(solved, per_iter) + df["compile_s"].fillna(0.0)


def packed_throughput(df: pd.DataFrame, price_per_gpu_hour: float | None = None) -> pd.DataFrame:
    """Solves per GPU-hour and cost per solve of every packing (:data:`PACKING_KEYS`: what ran,
    solo or K jobs at once on a GPU, with or without CUDA MPS), from train rows.

    K runs packed on one GPU share its wall clock, so a run of wall time ``w`` (s,
    :func:`run_wall_s`) costs ``w / K`` GPU-seconds (``K = concurrent``; a solo run costs ``w``).
    Per group:

        gpu_hours            = Σ_runs run_wall_s / concurrent / 3600           [GPU-h]
        solves_per_gpu_hour  = n_solved / gpu_hours                            [1 / GPU-h]
        cost_per_solve       = price_per_gpu_hour / solves_per_gpu_hour        [price unit]

    Unsolved runs count in ``gpu_hours`` (the GPU was paid for) but not in ``n_solved``. This
    assumes the GPU's K slots stayed full for the runs' time (a batch's tail, where fewer than K
    jobs are left, is not charged): compare packings of one batch size. Packed and solo runs are
    never pooled; ``time_to_solve_median_s`` is the median wall time to solve of that packing's
    runs (a packed run's is longer than a solo one: headline times stay solo, :func:`headline`).

    Args:
      df: :func:`published_runs` (needs `concurrent`, `mps`, `setup`, `config`, `solved`,
        `time_to_solve_s`, `iterations`, `rollout_s_per_iter`, `update_s_per_iter`, `compile_s`).
      price_per_gpu_hour: price of one GPU-hour (any currency; e.g. USD); None: no cost column.
    Returns:
      DataFrame indexed by :data:`PACKING_KEYS`: n_runs, n_solved, gpu_hours,
      solves_per_gpu_hour, time_to_solve_median_s, and ``cost_per_solve`` with a price (inf
      where nothing solved). Rows with an unknown packing (concurrent NaN) or no wall time (a
      solved run without a time to solve, a run without seconds per iteration) are left out,
      the latter with a printed count.
    Raises:
      ValueError: ``price_per_gpu_hour`` is not a positive finite number.
    """
    if price_per_gpu_hour is not None and not (
            isinstance(price_per_gpu_hour, (int, float)) and not isinstance(price_per_gpu_hour, bool)
            and math.isfinite(price_per_gpu_hour) and price_per_gpu_hour > 0):
        raise ValueError(f"price_per_gpu_hour must be a positive number (price of one GPU-hour), "
                         f"got {price_per_gpu_hour!r}")
    runs = with_code(df)
    runs = runs[pd.to_numeric(runs["concurrent"], errors="coerce").notna()]
    mps = runs["mps"].map(lambda v: v.strip().lower() == "true" if isinstance(v, str) else bool(v))
    runs = runs.assign(concurrent=runs["concurrent"].astype(int), mps=mps,
                       _gpu_s=run_wall_s(runs) / runs["concurrent"].astype(float))
    unknown = ~np.isfinite(runs["_gpu_s"].to_numpy(dtype=float))
    if unknown.any():  # no wall time: neither its GPU time nor its solve can be charged
        print(f"packed_throughput: {int(unknown.sum())} run(s) without a wall time (time to solve or "
              "seconds per iteration missing) left out", flush=True)
        runs = runs[~unknown]
    rows = []
    for keys, g in runs.groupby(list(PACKING_KEYS), sort=False):
        solved = g["solved"] == True  # noqa: E712
        hours = g["_gpu_s"].sum() / 3600.0
        n = int(solved.sum())
        rate = n / hours if hours > 0 else float("nan")
        row = dict(zip(PACKING_KEYS, keys), commits=commits_in(g), n_runs=len(g), n_solved=n, gpu_hours=hours,
                   solves_per_gpu_hour=rate,
                   time_to_solve_median_s=g.loc[solved, "time_to_solve_s"].median())
        if price_per_gpu_hour is not None:
            row["cost_per_solve"] = price_per_gpu_hour / rate if rate > 0 else float("inf")
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=[*PACKING_KEYS, "n_runs"]).set_index(list(PACKING_KEYS))
    return pd.DataFrame(rows).set_index(list(PACKING_KEYS))
