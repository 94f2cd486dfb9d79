"""Turn a finished training run into result rows (runs/ always, data/ only with `publish`): the
train row and curve (`finish_run`), an evaluation's row (`eval_row`). The summaries of the
published rows live in `measure.summary`, the learner studies in `measure.learners`; both are
re-exported here, the one name notebooks, figures and the survey use."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import pandas as pd

from fightlab import results
from fightlab.config import REFERENCE_SOLVER, DEFAULT_TASK, ConfigError, stage_done, task_id, to_dict
from fightlab.measure.learners import (learner_changes, learner_diff, learner_id, learner_labels,  # noqa: F401
                                       physics_label, pick_variant, run_stages, stage_iterations, stage_table,
                                       variant_table, with_stage0)
from fightlab.meta import new_run_id
from fightlab.measure.summary import (FACTOR_SETUPS, ORIGINAL_STUDY_S, PACKING_KEYS, REFERENCE_VERDICTS,  # noqa: F401
                                      SOLVE_VERDICTS, SUMMARY_KEYS, VOLATILE_PARAMS, code_of, commits_by_time,
                                      commits_in, config_id, cpu_baseline_runs, cpu_headline, factor_comparison,
                                      factor_setup, headline, no_headline_note, original_comparison,
                                      packed_throughput, physics_backend, published_runs, reference_verdict, run_wall_s,
                                      solve_summary, task_of, with_code)
from fightlab.paths import REPO_ROOT, RUNS


def train_row(trainer, res: dict) -> dict:
    """One data/results/train.csv row (metadata columns + train metrics) for a finished run."""
    cfg = trainer.cfg
    params = to_dict(cfg)
    # the CPU backend's policy on a GPU is part of the configuration and names its GPU; unset it
    # stays out, so config ids of runs without the field do not change
    if params.get("policy_device") is None:
        params.pop("policy_device", None)
    else:
        params["policy_gpu"] = trainer.segments[-1].get("policy_gpu")
    # Trainer.segments: what every segment ran with (packing: results.packing_of). The most
    # packed segment is the run's (mps: any packed segment's); segments of different code,
    # kernels or Newton solve mark the row as mixed (its time to solve is not one setup's)
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
    # the solver as the engine ran it (`sim.physics.engine_solver`)
    if (engine := getattr(trainer.env.unwrapped, "engine_solver", None)) is not None:
        params["physics_engine"] = engine
    if res.get("reference_eval"):  # the reference check of a solve, whole (fightlab.run.reference)
        params["reference_eval"] = res["reference_eval"]
    # `--nworld auto` (measure.sweep.auto_nworld): its ramp and rule, kept with the first segment
    if (auto := next((x["nworld_auto"] for x in segs if x.get("nworld_auto")), None)) is not None:
        params["nworld_auto"] = auto
    if len({(x.get("commit"), x.get("tree_factor_variant"), x.get("solver_loop")) for x in segs}) > 1:
        params["mixed_segments"] = True
    if getattr(trainer, "forked_from", None):  # a continuation of another run's row (fork_if_diverged)
        params["forked_from"] = trainer.forked_from
    # the CPU backend's rows name the CPU model and cores in the gpu column (meta.cpu_label)
    row = results.run_metadata(body=cfg.body, nworld=cfg.nworld, seed=cfg.seed, params=params,
                               device=cfg.device, backend=cfg.backend, cores=segs[-1].get("cores"))
    row["run_id"] = trainer.run_id

    def f(x):
        return float("nan") if x is None else float(x)

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
        peak_gpu_mem_mib=peak_gpu_mem_mib(cfg.device),
    )
    return row


def peak_gpu_mem_mib(device: str) -> float:
    """The process's peak memory on CUDA ``device`` so far [MiB]: warp's memory-pool high-water
    mark (`wp.get_mempool_used_mem_high`; MuJoCo Warp's and the env's arrays) plus torch's
    `torch.cuda.max_memory_reserved` (the policy, storage, update). A CLI training is one
    process, so this is its run's peak, the reference check included. NaN on the CPU device,
    or where warp's pool is off (its allocations then go uncounted)."""
    if not str(device).startswith("cuda"):
        return float("nan")
    import torch
    import warp as wp

    if not wp.is_mempool_enabled(device):
        return float("nan")
    return (int(wp.get_mempool_used_mem_high(device)) + int(torch.cuda.max_memory_reserved(device))) / 2**20


def fork_if_diverged(trainer, roots) -> str | None:
    """Give a run a new run_id when a train row of its run_id under one of ``roots`` (folders
    holding ``data/results/train.csv``) is not an earlier state of this run: its segments are not
    this run's first segments, or it went past the iteration this run's next segment started
    from. Two continuations of one checkpoint would otherwise replace each other's row and curve
    (one row per run_id). The new id goes into this run's checkpoints past the split too, so
    resuming the fork continues it; ``trainer.forked_from`` = ``"<old run_id>@<iteration>"``.

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
        from fightlab.run.checkpoint import relabel_checkpoints

        old = trainer.run_id
        trainer.run_id, trainer.forked_from = new_run_id(), f"{old}@{at}"
        relabel_checkpoints(trainer, old, at)  # its own states past the split
        print(f"run {old}: {path} holds a row of {old} that went on another way from iteration {at}: "
              f"this run is run {trainer.run_id} (forked_from {old}@{at}), so neither is replaced", flush=True)
        return old
    return None


def has_train_row(folder, run_id) -> bool:
    """Whether ``folder/data/results/train.csv`` (which `finish_run` writes last) holds a row of
    `run_id`; False when the file is absent."""
    if not results.results_path("train", folder).is_file():
        return False
    return bool((results.read_rows("train", folder)["run_id"].astype(str) == str(run_id)).any())


def finish_run(trainer, res: dict, publish: bool = False, root: Path | None = None) -> dict:
    """Write the run's train row and curve (all segments', from run_dir/rows.csv) under its
    run_dir and, with `publish`, under `root` (default: the repository; under
    results.publish_lock), then release the run folder. A resumed run's later segment replaces
    its row. Prints a one-line summary, then the run folder (a segment's end: one line with the
    checkpoint to resume). Returns the row (None when the segment ended before the run did).

    Raises ConfigError: `publish` from a run planned without it (`run.launch.plan_run`), before
    anything is written.
    """
    try:
        if res.get("segment_end"):
            # the run goes on with --resume: data/ holds one row per finished run
            print(f"segment ended at iteration {trainer.iteration} after {trainer.elapsed_s:.1f} s of "
                  f"training (amplitude {res['final_amplitude']:.1f}); continue with "
                  f"--resume {Path(trainer.run_dir) / 'latest.pt'}", flush=True)
            return None
        if publish and not getattr(trainer, "publish", False):
            raise ConfigError("publish: this run was planned without publishing; plan it with "
                              "fightlab.run.launch.plan_run(cfg, publish=True) (train --publish), "
                              "which applies the publish rule before any work")
        run_dir = Path(trainer.run_dir)
        rows_csv = run_dir / "rows.csv"
        curve = pd.read_csv(rows_csv) if rows_csv.exists() else pd.DataFrame(res["rows"])
        root = Path(root) if root else REPO_ROOT
        # the lock from the fork check to the last write: two continuations cannot both take the row
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
    params = {k: res.get(k) for k in ("run_id", "episodes_per_world", "ckpt_iteration", "ckpt_solved", "physics",
                                      "physics_engine")}
    params["checkpoint"] = str(checkpoint) if checkpoint else None
    params.update({k: res[k] for k in ("backend", "policy", "policy_sha256") if k in res})  # an exported policy's
    row = results.run_metadata(body=res["body"], nworld=res["nworld"], seed=seed, params=params, device=device,
                               backend=res.get("backend", "gpu"))  # the C engine's row names the CPU
    row.update(zero_action=bool(res["zero_action"]), timestep_s=float(res["timestep"]),
               **{k: int(res[k]) for k in ("episodes", "overflow_count", "nan_resets")},
               **{k: float(res[k]) for k in ("amplitude", "fall_rate", "tracking", "mean_episode_s",
                                             "tracking_survived")})
    results.publish_row("evaluate", row, publish, local_root, device)
    physics = _physics_text(res.get("physics"), res.get("physics_engine") if res.get("backend") == "cpu" else None)
    print(f"evaluate {res['body']}: {_policy_label(res)}; {physics}; timestep={res['timestep']:g}s "
          f"amplitude={res['amplitude']:g}; {res['nworld']} worlds × {res['seconds_per_world']:g} s "
          f"(--episodes {res['episodes_per_world']:g} per world; a world that falls starts "
          f"a new episode): {res['episodes']} episodes ended in all, fall_rate={res['fall_rate']:.3f} "
          f"(contact {res['contact_falls']}, tilt {res['tilt_falls']}) tracking={res['tracking']:.3f} "
          f"(survived episodes only: {res['tracking_survived']:.3f}) "
          f"mean_episode_s={res['mean_episode_s']:.2f} overflow_resets={res['overflow_count']} "
          f"nan_resets={res['nan_resets']}" + (" [published]" if publish else ""), flush=True)
    return row


def _physics_text(physics, engine=None) -> str:
    """Which physics an evaluation ran: "physics=reference (Newton 10/20 …)" or "physics=training (…)";
    MuJoCo's C engine (``engine``: its `physics_engine`, what it ran whatever was asked) by name."""
    if isinstance(engine, dict):
        return f"physics=MuJoCo's C engine ({physics_label({'env': engine})})"
    if not isinstance(physics, dict):
        return "physics=unrecorded"
    ref = all(physics.get(k) == v for k, v in REFERENCE_SOLVER.items())
    return f"physics={'reference' if ref else 'training'} ({physics_label({'env': physics})})"


def _policy_label(res: dict) -> str:
    """Which policy an evaluation ran: "zero action", or "iteration N (solved / NOT solved)" of
    the checkpoint, so a half-trained policy cannot pass for the solved one."""
    it = res.get("ckpt_iteration")
    if res["zero_action"]:
        return "policy=zero action" + ("" if it is None else
                                       f" (body and task from the checkpoint of iteration {it}; its policy did not run)")
    return (f"policy=iteration {it} ({'solved' if res['ckpt_solved'] else 'NOT solved'})"
            + (f" exported to {res['policy']}, onnxruntime, backend {res['backend']}" if res.get("policy") else ""))
