"""Command line: python -m fightlab {train, evaluate, export, render, reproduce, describe, slots, profile, figures, batch, sweep, bench,
compare-backends, survey}.

    python -m fightlab train --body simple --nworld 1024 --device cuda:0
    python -m fightlab train --resume runs/train/latest.pt --segment-s 540
    python -m fightlab evaluate runs/train/latest.pt --timestep 0.002
    python -m fightlab render runs/train/simple-1024-s0/latest.pt --seconds 5
    python -m fightlab reproduce [--only 06] [--size smoke|full] [--publish]
    python -m fightlab figures [--only train_curves ...] [--root DIR]
    python -m fightlab batch --job 'train --body simple' --grid seed=1,2,3,4 --concurrent 4
    python -m fightlab sweep [--body simple] [--nworld-list 128,256,...] [--publish] [--solve]
    python -m fightlab compare-backends [--body simple] [--nworld 1024] [--gpu-device cpu] [--publish]
    python -m fightlab survey launch --gpus RTX4090,L40S [--infra vast] [--picker sky|vastai] [--dry-run]

Bad input (unknown body, nworld not a positive integer, a CUDA device on a machine without
one, an unreadable checkpoint) ends with one line `fightlab: error: …` naming the value and
exit code 2, never a traceback from inside warp.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import signal
import sys
import threading
from pathlib import Path

from fightlab.cliparser import _cut, _parser


def cmd_bench(a) -> int:
    from fightlab.measure import bench

    rows = bench.run_bench(a.bodies, a.device, nworld=a.nworld, size="auto" if a.size is None else a.size,
                           train_s=a.train_s, time_limit_s=a.time_limit_s, out=a.out, publish=a.publish,
                           bandwidth_url=a.bandwidth_url, progress=not a.no_progress)
    return 0 if all(r["ok"] for r in rows) else 1


def cmd_train(a) -> int:
    from fightlab import results
    from fightlab.measure import sweep
    from fightlab.measure.report import finish_run, has_train_row
    from fightlab.paths import REPO_ROOT
    from fightlab.run.launch import plan_training, request_from_args
    from fightlab.run.runner import Trainer

    req = request_from_args(a)
    if a.publish:
        results.read_rows("train", REPO_ROOT)  # a torn results file: said before training
    plan = plan_training(req, progress=not a.no_progress, has_row=has_train_row,
                         pick_nworld=lambda probe, progress: sweep.auto_nworld(probe, progress=progress))
    if plan.cfg.resume:  # a torn row file in the run folder: said now, not after the training
        results.read_rows("train", Path(plan.cfg.resume).resolve().parent)
    with _memory_is_one_line("training", lambda: (plan.cfg.nworld, plan.cfg.body, plan.cfg.device)):
        with Trainer(plan, progress=not a.no_progress) as trainer:
            if plan.nworld_auto is not None:  # checkpointed with the segment; the row's params.nworld_auto
                trainer.segments[-1]["nworld_auto"] = plan.nworld_auto
            res = trainer.train()
            finish_run(trainer, res, publish=a.publish)
    return 0


@contextlib.contextmanager
def _memory_is_one_line(doing: str, sizes):
    """Out of memory inside (`_out_of_memory`: torch's, warp's, numpy's) as one ConfigError naming
    the worlds, body and device asked (``sizes()`` gives them) instead of a traceback."""
    from fightlab.config import ConfigError

    try:
        yield
    except (MemoryError, RuntimeError) as e:
        if not _out_of_memory(e):
            raise
        nworld, body, device = sizes()
        raise ConfigError(f"out of memory {doing} {nworld} worlds of {body} on {device} "
                          f"({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}); "
                          "choose a smaller --nworld") from None


def _out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` is a device or host allocation failing: MemoryError, torch.OutOfMemoryError,
    or a RuntimeError of torch or warp saying so ("out of memory", "Failed to allocate N bytes",
    numpy's "Unable to allocate" inside warp's array conversion)."""
    text = str(e).lower()
    return isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError" or bool(
        re.search(r"out of memory|failed to allocate \d+ bytes|unable to allocate|cannot allocate memory|"
                  r"cudaerrormemoryallocation", text))


def cmd_evaluate(a) -> int:
    from fightlab.config import REFERENCE_CHECKS
    from fightlab.measure.report import eval_row
    from fightlab.run.launch import EvalRequest, evaluate_request

    with _memory_is_one_line("evaluating", lambda: _eval_sizes(a)):
        kind, res, device = evaluate_request(EvalRequest(
            checkpoint=a.checkpoint, body=a.body, nworld=a.nworld, device=a.device, episodes=a.episodes,
            timestep=a.timestep, zero_action=a.zero_action, amplitude=a.amplitude, seed=a.seed,
            physics=a.physics, reference_check=a.reference_check, publish=a.publish, policy=a.policy,
            backend=a.backend), progress=not a.no_progress)
    if kind == "evaluate":
        eval_row(res, checkpoint=a.checkpoint, device=device, seed=a.seed, publish=a.publish)
        return 0
    for label, _ in REFERENCE_CHECKS:
        r = res[label]
        print(f"reference {label} (timestep {r['timestep']:g} s, {res['nworld']} worlds): fall_rate="
              f"{r['fall_rate']:.3f} tracking={r['tracking']:.3f} episodes={r['episodes']} "
              f"overflow={r['overflow_count']} nan={r['nan_resets']}")
    print(f"reference check: {'passed' if res['passed'] else 'FAILED: ' + res['reason']} "
          f"[{res['seconds']:.1f} s]", flush=True)
    return 0 if res["passed"] else 1


def _eval_sizes(a) -> tuple:
    """The worlds, body and device an evaluation asked for (the checkpoint's where not given)."""
    from fightlab.devices import pick_device
    from fightlab.run.checkpoint import safe_load
    from fightlab.run.evaluate import DEFAULT_NWORLD

    cfg = {}
    with contextlib.suppress(Exception):
        cfg = safe_load(a.checkpoint)["config"] if a.checkpoint and (a.nworld is None or a.body is None) else {}
    device = a.device
    with contextlib.suppress(Exception):
        device = pick_device(a.device)
    return (a.nworld or cfg.get("nworld", DEFAULT_NWORLD), a.body or cfg.get("body", "?"), device)


def cmd_export(a) -> int:
    from fightlab.run.export import export_policy

    r = export_policy(a.checkpoint, out=a.out, device=a.device, progress=not a.no_progress)
    print(f"export {r['body']} (iteration {r['iteration']} of run {r['run_id']}): {r['path']}; parity "
          f"max |Δaction| = {r['max_abs_diff']:.3g} on {r['n_obs']} observations")
    return 0


def cmd_render(a) -> int:
    from fightlab.figures.video import render_episode

    res = render_episode(a.checkpoint, out=a.out, seconds=a.seconds, fps=a.fps, width=a.width,
                         height=a.height, seed=a.seed, device=a.device, gif=not a.no_gif,
                         zero_action=a.zero_action, amplitude=a.amplitude, body=a.body,
                         force=a.force, gif_width=a.gif_width, gif_fps=a.gif_fps,
                         progress=not a.no_progress)
    policy = "zero action" if res["zero_action"] else f"iteration {res['iteration']} of run {res['run_id']}"
    print(f"render {res['body']} ({policy}), seed {res['seed']}: {res['seconds']:g} s, "
          f"{res['pushes']} push(es), {res['falls']} fall(s); simulate {res['simulate_s']:.1f} s, "
          f"draw {res['render_s']:.1f} s, write {res['write_s']:.1f} s")
    print(f"  {res['mp4']}  ({res['frames']} frames {res['width']}x{res['height']} at {res['fps']} fps, "
          f"{res['mp4_bytes'] / 1e6:.2f} MB)")
    if res["gif"] is not None:
        print(f"  {res['gif']}  ({res['gif_frames']} frames, {res['gif_bytes'] / 1e6:.2f} MB)")
    return 0


def cmd_reproduce(a) -> int:
    from fightlab.devices import default_device, validate_device
    from fightlab.reproduce import NotebookError, reproduce

    device = validate_device(default_device() if a.device is None else a.device)
    size = "auto" if a.size is None else a.size  # the notebooks resolve "auto" alike and say so first
    try:
        return reproduce(only=a.only, size=size, publish=a.publish, device=device,
                         log_output=a.log_output, publish_times=a.publish_times)
    except NotebookError as e:  # the cell's traceback is in the executed notebook
        print(f"fightlab: error: {e}", file=sys.stderr)
        return 1


def cmd_slots(a) -> int:
    from fightlab.measure import slots

    slots.command(a.body, nworld=a.nworld, seconds=a.seconds, device=a.device, limp=a.limp, publish=a.publish,
                  progress=not a.no_progress)
    return 0


#: the fewest profiled steps a published profile row may have (notebook 02's full size, 20)
PUBLISH_MIN_NSTEP = 20


def cmd_profile(a) -> int:
    """The profile's tables, then its row: under runs/profile (appended), with --publish under
    data/ (physics only; the device and size checked by main's gate, `publish_plans`)."""
    import pandas as pd

    from fightlab import results
    from fightlab.config import ConfigError, EnvConfig, reference_env
    from fightlab.measure.profile import profile, result_row
    from fightlab.paths import REPO_ROOT, RUNS

    if a.publish and a.what != "physics":
        raise ConfigError(f"--publish takes --what physics only (profile.csv's rows), got {a.what!r}")
    if a.publish and a.nstep < PUBLISH_MIN_NSTEP:
        raise ConfigError(f"--publish takes --nstep >= {PUBLISH_MIN_NSTEP} (notebook 02's full size), got {a.nstep}")
    env = reference_env(EnvConfig()) if a.physics == "reference" else None
    res = profile(a.body, nworld=a.nworld, nstep=a.nstep, device=a.device, what=a.what, tree_factor=a.tree_factor,
                  top=a.top, progress=not a.no_progress, env=env, solver_loop=a.solver_loop)
    print(res.summary())
    with pd.option_context("display.width", 160, "display.max_columns", 12):
        print(res.stage_table())
        print(res.by_kernel.head(a.top))
    if res.failures:
        raise ConfigError(f"no row written: {'; '.join(res.failures)}")
    path = results.append_row("profile", result_row(res), REPO_ROOT if a.publish else RUNS / "profile")
    print(f"profile: 1 row -> {path}")
    return 0


def cmd_figures(a) -> int:
    from fightlab.figures import DataFileError, draw

    try:
        drawn = draw(only=a.only, root=a.root)
    except DataFileError as e:  # the other figures were drawn; this data needs fixing first
        print(f"fightlab: error: {e}", file=sys.stderr)
        return 2
    skipped = [name for name, paths in drawn.items() if not paths]
    print(f"figures: drew {len(drawn) - len(skipped)} of {len(drawn)}"
          + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return 0


def cmd_sweep(a) -> int:
    from fightlab.measure import sweep

    return sweep.command(summary=a.summary, solve=a.solve, run=a.run, publish=a.publish, device=a.device,
                         bodies=a.body, nworld_list=a.nworld_list, sweep_id=a.sweep_id,
                         solve_nworld_list=a.solve_nworld_list, seeds=a.seeds, concurrent=a.concurrent,
                         max_iterations=a.max_iterations, iterations=a.iterations, skip=a.skip, seed=a.seed,
                         progress=not a.no_progress, run_argv=main)


def cmd_compare_backends(a) -> int:
    from fightlab.measure import backends

    rows = backends.compare_from_flags(
        a.body, nworld=a.nworld, gpu_device=a.gpu_device, cpu_nworld=a.cpu_nworld, workers=a.workers,
        worlds_per_worker=a.worlds_per_worker, cpu_layout=a.cpu_layout,
        cpu_policy_device=a.cpu_policy_device, overrides=a.set, iterations=a.iterations, skip=a.skip,
        seed=a.seed, publish=a.publish, progress=not a.no_progress)
    print("\n".join(backends.summary_lines(rows)))
    return 0


def cmd_describe(a) -> int:
    from fightlab.bodies import build
    from fightlab.bodies.describe import describe
    from fightlab.config import validate_body

    print(json.dumps(describe(build(validate_body(a.body))), indent=2))
    return 0


def publish_plans(a) -> list[dict]:
    """What the command ``a`` asks for would publish, as `publish.check_publish`'s keywords (the
    device, size, backend, what it writes, ...), one per thing it writes: the command line's
    half of the rule before any work (`publish.refuse_publish`). A training's are its gate's
    (`run.launch.plan_run`, which every run passes); a batch's jobs meet theirs in the gate."""
    from fightlab import devices
    from fightlab.sizes import resolve_size, validate_size

    if not (getattr(a, "publish", False) or getattr(a, "publish_times", False)) or a.cmd in ("train", "batch"):
        return []
    if a.cmd == "reproduce":
        from fightlab.reproduce import publish_plans as notebook_plans

        device = devices.validate_device(devices.default_device() if a.device is None else a.device)
        return notebook_plans(a.only, "auto" if a.size is None else a.size, a.publish, device, a.publish_times)
    if a.cmd == "compare-backends":
        from fightlab.measure.backends import publish_plans as backend_plans

        return backend_plans(a.gpu_device, a.cpu_policy_device, publish=True)
    if (a.cmd == "evaluate" and a.reference_check) or (a.cmd == "sweep" and (a.summary or a.solve)):
        return []  # they refuse --publish themselves (--reference-check, --summary) or train through the gate
    device = devices.pick_device(a.device)
    if a.cmd == "evaluate" and a.policy and a.backend == "cpu":  # MuJoCo's C engine: a row naming the CPU
        return [dict(publish=True, device=device, backend="cpu", what="the evaluation row")]
    one = {"evaluate": dict(what="the evaluation row", gpu_advice="an evaluation publishes from a CUDA "
                            "device: --device cuda:N, with --policy also --backend gpu"),
           "slots": dict(what="slot rows"), "sweep": dict(what="sweep rows", size=None),
           "profile": dict(what="the profile row", size=None, gpu_advice="a profile publishes from a CUDA device"),
           "bench": dict(what="bench rows", size=validate_size(resolve_size(
               "auto" if a.size is None else a.size, device)) if a.cmd == "bench" else None)}[a.cmd]
    return [dict(publish=True, device=device, **one)]


#: the commands a batch job may run (every command but batch itself)
JOB_COMMANDS = ("train", "evaluate", "render", "reproduce", "describe", "slots", "profile", "figures",
                "compare-backends")


def check_job(argv: list[str]) -> tuple[str | None, str | None]:
    """One parse of a job's fightlab argv: (error, identity).

    error: the line the command line would print (a usage error; for a new train job any value
    its config or its run folder refuses, `_job_config`), or None when accepted. A resumed or
    `--nworld auto` job's values are checked when it runs (they need its checkpoint or its GPU).
    identity: what the argv runs, as text: every flag as argparse reads it (typed: ``01`` is 1),
    paths resolved; for a new train job the values its config takes from them replaced by that
    whole config; None when refused."""
    import io

    from fightlab.config import ConfigError, to_dict

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            a = _job_parser().parse_args(argv)
    except SystemExit as e:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return (lines[-1].split("error: ", 1)[-1] if lines else f"refused (exit {e.code})") if e.code else None, None
    args = dict(vars(a))
    for k in ("run_dir", "resume", "root", "batch_dir"):
        if isinstance(args.get(k), str):
            args[k] = str(Path(args[k]).expanduser().resolve())
    if a.cmd == "train" and a.resume is None and not _auto(a.nworld):
        try:  # every --set key and value, and the config they make, before any job runs
            cfg = to_dict(_job_config(a))
        except ConfigError as e:
            return str(e), None
        for k in ("body", "nworld", "seed", "max_iterations", "checkpoint_every", "segment_s", "backend", "set"):
            args.pop(k, None)  # read into the config
        args["config"] = cfg
    elif a.cmd == "train" and a.set:
        try:
            from fightlab.run.launch import plan_overrides
            from fightlab.config import TrainConfig

            plan_overrides(TrainConfig(), a.set)
        except ConfigError as e:
            return str(e), None
    return None, json.dumps(args, sort_keys=True, default=str)


@functools.lru_cache(maxsize=1)
def _job_parser() -> argparse.ArgumentParser:
    """The command line's parser, built once for a batch's many job checks."""
    return _parser()


def _auto(nworld) -> bool:
    return isinstance(nworld, str) and nworld.strip().lower() == "auto"


def _job_config(a):
    """A new train job's TrainConfig, through `plan_training` and the run's gate as its run would
    pass them, its devices unchecked here (`device_here=False`: the batch's own check,
    `batch.check_devices`), and a `--run-dir` its run would refuse (`rundir.check_folder`).
    Raises ConfigError, one line."""
    from fightlab.run.launch import plan_training, request_from_args
    from fightlab.rundir import check_folder

    if a.run_dir is not None:  # held or not now, it may be free when the job starts
        check_folder(a.run_dir, fresh=True, in_use=False)
    return plan_training(request_from_args(a), device_here=False).cfg


def cmd_batch(a) -> int:
    from fightlab import batch

    return batch.command(resume=a.resume, batch_dir=a.batch_dir, concurrent=a.concurrent, jobs_file=a.jobs,
                         job=a.job, grid=a.grid, sets=a.set, gpus=a.gpus, job_timeout_s=a.job_timeout_s,
                         budget_s=a.budget_s, min_left_s=a.min_left_s, no_mps=a.no_mps,
                         with_checkpoints=a.with_checkpoints, retry_failed=a.retry_failed,
                         progress=not a.no_progress, commands=JOB_COMMANDS, check_job=check_job)


def cmd_survey(a) -> int:
    from fightlab import survey_launch

    return survey_launch.command(
        a.gpus, infra=a.infra, picker=a.picker, bodies=a.bodies, tries=a.tries, min_cuda=a.min_cuda,
        min_driver=a.min_driver, min_mbit_s=a.min_mbit_s, max_price=a.max_price, bandwidth_url=a.bandwidth_url,
        time_limit_s=a.time_limit_s, survey_id=a.survey_id, offers_json=a.offers_json, dry_run=a.dry_run)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from fightlab.config import ConfigError
    from fightlab.errors import Diverged, Terminated
    from fightlab.paths import RUNS_ENV, runs_problem
    from fightlab.results import MalformedRowError
    from fightlab.run.checkpoint import CheckpointError

    if (problem := runs_problem()) is not None:
        print(f"fightlab: error: {problem}: set {RUNS_ENV} to a folder named runs, or unset it for "
              "the repository's runs/", file=sys.stderr)
        return 2

    def on_sigterm(signum, frame):  # as Ctrl-C: locks released, one line, exit 143
        raise Terminated(signum)

    main_thread = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, on_sigterm) if main_thread else None
    try:
        from fightlab.publish import refuse_publish

        refuse_publish(publish_plans(args))  # before any work; a training's in its gate
        return globals()["cmd_" + args.cmd.replace("-", "_")](args)  # train: cmd_train
    except (ConfigError, CheckpointError, MalformedRowError) as e:
        print(f"fightlab: error: {_cut(str(e))}", file=sys.stderr)
        return 2
    except Diverged as e:  # a training's learner produced non-finite numbers: no checkpoint of them
        print(f"fightlab: error: {_cut(str(e))}", file=sys.stderr)
        return 1
    except OSError as e:  # a path the filesystem refuses (too long, read-only, full disk, …)
        print(f"fightlab: error: {e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        from fightlab.run.runner import TrainingStopped

        if isinstance(e, TrainingStopped):  # a checkpoint of the last whole iteration is saved
            print(f"fightlab: {e}", file=sys.stderr)
            return 128 + e.signum
        what, code = (f"terminated ({e})", 128 + e.signum) if isinstance(e, Terminated) else ("interrupted", 130)
        print(f"fightlab: {what}" + ("; a training's run folder is free again: when it saved a "
              "checkpoint, continue it with --resume <run folder>/latest.pt" if args.cmd == "train" else ""),
              file=sys.stderr)
        return code
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, old_term)


if __name__ == "__main__":
    raise SystemExit(main())
