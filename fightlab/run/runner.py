"""A training run: the env it builds, the loop (:mod:`fightlab.rl.loop`) on it, the run folder
(:mod:`fightlab.rundir`), ``rows.csv`` (:mod:`fightlab.rl.rows`), checkpoints and ``--resume``
(:mod:`fightlab.run.checkpoint`) and what each segment ran with.

Time to solve = the summed training wall clock of the
iterations up to and including the solving one, over all `--resume` segments; compilation and
graph capture (`compile_s`) are excluded and reported apart.
"""

from __future__ import annotations

import contextlib
import functools
import math
import signal
import threading
import time
from pathlib import Path

import numpy as np
import torch

from fightlab.config import ConfigError, TrainConfig, stage_done, task_warning
from fightlab.devices import announce_compile
from fightlab.errors import Diverged, Terminated
from fightlab.run.checkpoint import restore_checkpoint, save_checkpoint
from fightlab.run.launch import TrainPlan, plan_run
from fightlab.rl.loop import TrainLoop
from fightlab.rl.models import nonfinite_tensors
from fightlab.rl.env_io import PolicyIO
from fightlab.rl.rows import append_row, rebuild_note, truncate_rows, write_rows

__all__ = ["Trainer", "TrainingStopped", "PolicyIO", "announce_compile", "train"]


#: what a diverged run's message advises: a resume replays the same iterations (the run is
#: deterministic), and a resumed run keeps its config
DIVERGED_ADVICE = ("a checkpoint it saved, if any, holds its last finite state; resuming replays the same "
                   "iterations: start a new run with other learner settings")


def check_update_finite(row: dict) -> None:
    """Raise :class:`fightlab.errors.Diverged` when the row's update values (`rl.ppo.STATS`: the
    losses, KL, clip fraction, rate; rsl_rl's ``rsl_*`` losses; read in the iteration's one host
    read) are not all finite:
    the weights that update wrote are then not usable either, and the run stops before its next
    checkpoint."""
    from fightlab.rl.ppo import STATS

    keys = [k for k in row if k in STATS or k.startswith("rsl_")]  # rsl_rl's losses: rsl_<name>
    bad = {k: row[k] for k in keys if isinstance(row[k], (int, float)) and not math.isfinite(row[k])}
    if bad:
        raise Diverged(f"iteration {row['iteration']}: the update's {', '.join(f'{k} {v}' for k, v in bad.items())} "
                       f"are not finite: the learner diverged and the run stops ({DIVERGED_ADVICE})")


class TrainingStopped(KeyboardInterrupt):
    """A training stopped by SIGINT (Ctrl-C, a batch's timeout) or SIGTERM (a preemption, `kill`)
    once the iteration under way ended and its checkpoint was written (a second signal stops at
    once). A KeyboardInterrupt, so whatever catches Ctrl-C catches it.

    Attributes: signum (int), iteration (int, the checkpoint's), checkpoint (Path to resume)."""

    def __init__(self, signum: int, iteration: int, checkpoint: Path):
        self.signum, self.iteration, self.checkpoint = signum, iteration, Path(checkpoint)
        super().__init__(f"stopped by {signal.Signals(signum).name} at iteration {iteration}; its checkpoint "
                         f"is saved: continue with --resume {self.checkpoint}")


@contextlib.contextmanager
def _signals_stop_after_the_iteration():
    """While held, the first SIGINT or SIGTERM only sets ``box["signum"]`` (the loop saves and stops
    after its iteration); a second raises `Terminated` (an interrupt) at once. Signals the process ignores
    stay ignored; off the main thread (where Python cannot install handlers) nothing changes."""
    box: dict = {"signum": None}
    if threading.current_thread() is not threading.main_thread():
        yield box
        return

    def handler(signum, frame):
        if box["signum"] is not None:
            raise Terminated(signum)
        box["signum"] = signum

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            old[sig] = signal.signal(sig, handler)
    try:
        yield box
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)

class Trainer(TrainLoop):
    """One training run: builds the task (`fightlab.envs.task.StanceTask`), trains it with the
    loop (`TrainLoop`), writes its run folder.

    Args:
      cfg: a `run.launch.TrainPlan` (the gate's, trusted as it is), or a TrainConfig, which
        passes the gate here (`plan_run`, with `has_row`).
      progress: show a tqdm bar.

    Attributes (besides the loop's): publish (the plan's), rundir (`fightlab.rundir.RunDir`) and
    run_dir (its path), run_id (all segments share it), history (every row of the run, all
    segments), segments (what each segment ran with: commit, kernels, devices, packing).
    """

    def __new__(cls, cfg: "TrainConfig | TrainPlan", progress: bool = True, has_row=None):
        # the gate first: the learner is the plan's (a resume's is its checkpoint's)
        plan = cfg if isinstance(cfg, TrainPlan) else plan_run(cfg, has_row=has_row)
        if cls is Trainer and plan.cfg.learner == "rsl_rl":
            cls = rsl_trainer()
        obj = super().__new__(cls)
        obj._plan = plan
        return obj

    def __init__(self, cfg: "TrainConfig | TrainPlan", progress: bool = True, has_row=None):
        from fightlab.rundir import RunDir

        # the gate (`run.launch.plan_run`, passed in `__new__`) checked and decided it all
        plan = self._plan
        cfg, resume_ck, self.publish = plan.cfg, plan.checkpoint, plan.publish
        # one writer per run folder; a fresh run deletes only the files an earlier run wrote
        self.rundir = RunDir(cfg.run_dir, fresh=resume_ck is None, resume=cfg.resume)
        # a run that changes a Fixed field of the task says so once (after the folder's last
        # refusal, so a refused run prints one line); its rows carry the task id
        if (warn := task_warning(cfg)) is not None:
            print(f"fightlab: warning: {warn}", flush=True)
        if self.rundir.removed:
            print(f"fresh run in {self.rundir.path}: removed {len(self.rundir.removed)} files of an "
                  "earlier run", flush=True)
        try:
            self._build(cfg, progress, resume_ck)
        except BaseException:
            self.rundir.abandon()  # a failed start (out of memory) leaves no empty manifest behind
            raise

    def _build(self, cfg: TrainConfig, progress: bool, resume_ck: dict | None) -> None:
        from fightlab.envs.task import StanceTask
        from fightlab.meta import git_commit, gpu_name, new_run_id, packing_from_env, utc_now
        from fightlab.sim.cpu import backend_record

        self.progress = progress
        announce_compile(cfg.body, cfg.device, cfg.backend)  # building the env compiles warp's kernels
        env = StanceTask(cfg, checked=True)  # the plan passed the gate
        super().__init__(cfg, env)
        self.history: list[dict] = []
        self.run_id = new_run_id()
        # what this segment ran with; resumed runs carry the earlier segments' entries too, so a
        # row whose segments ran different code, kernels or devices says so (report.train_row)
        engine = getattr(env.unwrapped, "engine_solver", None) or {}
        self.segments = [dict(commit=git_commit(), tree_factor_variant=env.unwrapped.tree_factor_variant,
                              solver_loop=engine.get("solver_loop"),
                              **(packing_from_env() or dict(concurrent=1, mps=False, gpu_jobs=1)),
                              device=cfg.device, gpu=gpu_name(cfg.device),
                              **backend_record(env.unwrapped),
                              **({"policy_device": cfg.policy_device, "policy_gpu": gpu_name(cfg.policy_device)}
                                 if cfg.policy_device else {}),
                              max_iterations=cfg.max_iterations, segment_s=cfg.segment_s,
                              start_iteration=int(resume_ck["iteration"]) if resume_ck else 0,
                              started=utc_now(), segment_id=new_run_id())]
        self.run_dir = self.rundir.path
        self._resume_ck = resume_ck
        #: the reference check's result once it ran (`fightlab.run.reference`; saved in checkpoints)
        self.reference_eval = resume_ck.get("reference_eval") if resume_ck else None

    @property
    def curriculum(self):
        """The task's curriculum (`fightlab.envs.curriculum.Curriculum`: stage, amplitude, solved)."""
        return self.env.curriculum

    def close(self) -> None:
        """Release the run folder (its lock); the Trainer can not train after this."""
        self.rundir.release()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        """Warm the loop up, restore a resumed run's checkpoint (rows.csv = its rows), capture."""
        self.warm_up()
        rows_csv = self.run_dir / "rows.csv"
        if self._resume_ck is not None:
            restore_checkpoint(self, self._resume_ck)
            if self.history:  # rows.csv is the checkpoint's history (a copy's, a branch's too)
                note = rebuild_note(rows_csv, self.history)
                write_rows(rows_csv, self.history)
                if note:
                    print(note, flush=True)
            elif rows_csv.exists():  # older checkpoints: drop rows past the checkpoint
                truncate_rows(rows_csv, self.iteration)
            self._pull()  # the loaded observation
        self.capture()  # after a resume's load: the graphs see the loaded tensors

    def iterate(self) -> dict:
        """The loop's iteration (`TrainLoop.iterate`), its row kept in the run's history; slot
        overflows and non-finite states said in one line each."""
        row = super().iterate()
        summary, cfg = self.extras["summary"], self.cfg
        if summary["overflow_worlds"]:
            slots = self.env.unwrapped.slots
            print(f"OVERFLOW iteration {self.iteration}: {summary['overflow_worlds']} slot resets in "
                  f"{summary['overflow_distinct_worlds']} of {cfg.nworld} worlds (a world that runs "
                  f"out of slots is reset, counted as a fall, and may run out again; resets by "
                  f"constraint rows: {summary['nefc_overflow']}, by contacts: "
                  f"{summary['contact_overflow']}; nconmax={slots.nconmax}, "
                  f"njmax={slots.njmax})", flush=True)
        if summary["nan_resets"]:
            print(f"NAN iteration {self.iteration}: {summary['nan_resets']} worlds had non-finite "
                  "qpos/qvel; reset and counted as falls", flush=True)
        check_update_finite(row)
        self.history.append(row)
        return row

    def restore_learner(self, ck: dict) -> None:
        """A resumed checkpoint's learner state (fightlab's: `run.checkpoint.load_policy`, the
        optimizer's rate adopted, the observation history); `RslRun` has its own."""
        from fightlab.run.checkpoint import adopt_optimizer_state, load_policy

        load_policy(self.agent, ck, self.cfg.body, self.env, self.optimizer)
        adopt_optimizer_state(self.optimizer, self.lr)  # the loaded rate, capturable, steps on device
        if self.obs_hist is not None:  # the policy's input as the checkpoint left it
            self.obs_hist.load_state_dict(ck["obs_history"])

    def save(self, path=None) -> Path:
        """Write a checkpoint (`fightlab.run.checkpoint.save_checkpoint`). Raises
        `fightlab.errors.Diverged`, writing nothing, when the agent's weights are not all finite
        (such a checkpoint could not be resumed; the last one stays the run's last finite state)."""
        bad = nonfinite_tensors(self.agent.state_dict())
        if bad:
            raise Diverged(f"iteration {self.iteration}: the agent's {', '.join(bad[:3])}{' …' if len(bad) > 3 else ''} "
                           f"are not all finite: the learner diverged, no checkpoint written ({DIVERGED_ADVICE})")
        return save_checkpoint(self, path)

    # ------------------------------------------------------------------------------------------
    def train(self) -> dict:
        """Train until solved (if `stop_when_solved`), `max_iterations` or `segment_s`. A solve
        ends with the reference check (`fightlab.run.reference`): solved and time_to_solve_s stand
        only when it passes.

        Returns a result dict (:meth:`result`, with reference_eval and reference_eval_s, its
        seconds apart from the time to solve, after a solve).
        """
        if not self.rundir.locked:
            raise ConfigError(f"this Trainer of {self.run_dir} is closed (it trained already or "
                              "was closed); make a new Trainer, or resume from its checkpoint")
        try:
            return self._train()
        except BaseException:
            self.rundir.abandon()  # the folder free for --resume; a start that wrote nothing leaves nothing
            raise

    def _train(self) -> dict:
        from tqdm import tqdm  # plain text bar: works in terminals and notebooks without ipywidgets

        from fightlab.config import to_dict
        from fightlab.run.tracking import RunLog

        cfg = self.cfg
        self.segment_end = False
        self.rundir.add("rows.csv", "rows.csv.tmp")
        self._start()
        rows_path = self.run_dir / "rows.csv"
        self.log = RunLog(cfg.logger, self.run_dir, self.run_id, to_dict(cfg), claim=self.rundir.add)
        try:
            seg_t0 = time.perf_counter()
            bar = tqdm(total=cfg.max_iterations, initial=self.iteration, disable=not self.progress,
                       desc=f"{cfg.body} ×{cfg.nworld}", unit="it")
            try:
                with _signals_stop_after_the_iteration() as stop:
                    self._loop(cfg, bar, rows_path, seg_t0, stop)
            finally:  # an error's line must not land on the bar's
                bar.close()
            path = self.save()
            res = self.result()
            if self.curriculum.solved:
                res.update(self._reference(path, res))
                self.reference_eval = res["reference_eval"]
                self.log.reference(self.reference_eval, self.iteration)
                self.save(path)  # the verdict joins the checkpoint: a resume now finds the run finished
        finally:
            self.log.close()
        return res

    def _loop(self, cfg: TrainConfig, bar, rows_path: Path, seg_t0: float, stop: dict) -> None:
        """The iterations of one segment: rows, progress, checkpoints; raises TrainingStopped
        after the iteration a signal arrived in, its checkpoint written."""
        while not self._run_ends(cfg):
            row = self.iterate()
            append_row(rows_path, row)
            self.log.row(row)
            bar.update(1)
            if not self.progress and (self.iteration % 25 == 0 or row["event"] in ("widen", "solved")):
                print(f"it {self.iteration} t={self.elapsed_s:.1f}s a={row['amplitude']:.1f} "
                      f"{row['event']} fall={row['window_fall_rate']:.3f} trk={row['window_tracking']:.2f} "
                      f"ep={row['window_episode_s']:.2f}s r={row['reward']:.3f} "
                      f"sps={row['env_steps_per_s']:.0f} roll={row['rollout_s']:.3f}s "
                      f"upd={row['update_s']:.3f}s lr={row['learning_rate']:.1e}", flush=True)
            bar.set_postfix(a=row["amplitude"], fall=f"{row['window_fall_rate']:.3f}",
                            trk=f"{row['window_tracking']:.2f}", sps=f"{row['env_steps_per_s']:.0f}")
            if cfg.checkpoint_every and self.iteration % cfg.checkpoint_every == 0:
                self.save()
            last = self._run_ends(cfg)
            if stop["signum"] is not None:
                if last:  # the run ends with this iteration anyway: it writes its row, as asked or not
                    print(f"fightlab: {signal.Signals(stop['signum']).name} at the run's last iteration "
                          f"({self.iteration}): finishing it (its row is written)", flush=True)
                    break
                bar.close()
                path = self.save()
                raise TrainingStopped(stop["signum"], self.iteration, path.parent / "latest.pt")
            if cfg.segment_s is not None and time.perf_counter() - seg_t0 > cfg.segment_s and not last:
                self.segment_end = True
                break

    def _run_ends(self, cfg: TrainConfig) -> bool:
        """Whether the run ends before another iteration: max_iterations, time_limit_s, the
        solve (with stop_when_solved) or the stop stage reached."""
        return (self.iteration >= cfg.max_iterations or (self.curriculum.solved and cfg.stop_when_solved)
                or stage_done(cfg, self.curriculum.stage)
                or (cfg.time_limit_s is not None and self.elapsed_s >= cfg.time_limit_s))

    def _reference(self, checkpoint, res: dict) -> dict:
        """The reference check of a solve (`fightlab.run.reference`): what it changes in the result
        (solved and time_to_solve_s only when it passes; reference_eval, reference_eval_s)."""
        cfg, ref = self.cfg, self._reference_eval(checkpoint)
        ref.update(curriculum_time_to_solve_s=res["time_to_solve_s"], curriculum_iterations=res["iterations"])
        runs = "; ".join(f"{k} fall {ref[k]['fall_rate']:.3f} tracking {ref[k]['tracking']:.3f}"
                         for k in ("dt", "dt/2"))
        verdict = "passed" if ref["passed"] else f"FAILED ({ref['reason']}): not a solve of the task"
        print(f"reference check ({ref['nworld']} worlds, Newton {ref['solver']['solver_iterations']}/"
              f"{ref['solver']['solver_ls_iterations']}): {runs}; {verdict} [{ref['seconds']:.1f} s]", flush=True)
        out = dict(reference_eval=ref, reference_eval_s=ref["seconds"])
        if not ref["passed"]:
            out.update(solved=False, time_to_solve_s=None)
        return out

    def _reference_eval(self, checkpoint) -> dict:
        """`fightlab.run.reference.reference_check` of the saved policy."""
        from fightlab.run.reference import reference_check

        cfg = self.cfg
        return reference_check(checkpoint, cfg, cfg.device, cfg.reference_nworld, seed=cfg.seed + 1,
                               progress=self.progress)

    def result(self) -> dict:
        """solved, time_to_solve_s (None if unsolved), iterations, compile_s; medians past the first
        iteration (env_steps_per_s, physics_steps_per_s, rollout_s_per_iter, update_s_per_iter,
        host_reads_per_iter: `fightlab.timing.HostReads`); the last window's final_amplitude,
        fall_rate, mean_episode_s, tracking; overflow_count, nan_resets, graph_fallbacks (graphs
        asked for that ran eager, any segment), elapsed_s, last_row, rows, segment_end."""
        rows = self.rows or self.history  # a segment that only ran the reference check: the run's
        steady = rows[1:] if len(rows) > 1 else rows
        med = lambda k: float(np.median([r[k] for r in steady])) if steady else math.nan  # noqa: E731
        last = rows[-1] if rows else {}
        ws = self.curriculum.last_stats()
        return dict(solved=self.curriculum.solved, time_to_solve_s=self.time_to_solve_s,
                    iterations=self.solve_iteration or self.iteration, compile_s=self.compile_s,
                    env_steps_per_s=med("env_steps_per_s"), physics_steps_per_s=med("physics_steps_per_s"),
                    rollout_s_per_iter=med("rollout_s"), update_s_per_iter=med("update_s"),
                    final_amplitude=self.curriculum.amplitude, fall_rate=ws["fall_rate"],
                    mean_episode_s=ws["mean_episode_s"], tracking=ws["tracking"],
                    tracking_survived=ws["tracking_survived"],
                    overflow_count=int(sum(r["overflow_count"] for r in rows)),
                    nan_resets=int(sum(r["nan_resets"] for r in rows)),
                    host_reads_per_iter=med("host_reads"),
                    graph_fallbacks=int(max((r.get("graph_fallbacks") or 0 for r in self.history), default=0)),
                    elapsed_s=self.elapsed_s, last_row=last, rows=rows,
                    segment_end=bool(getattr(self, "segment_end", False)) and not self.curriculum.solved
                    and not stage_done(self.cfg, self.curriculum.stage))


@functools.cache
def rsl_trainer() -> type:
    """The `Trainer` with rsl_rl's learner (`fightlab.run.rsl`: `RslRun` first, `RslLearner` as
    its loop in place of fightlab's `TrainLoop`)."""
    from fightlab.run.rsl import RslLearner, RslRun

    return type("RslTrainer", (RslRun, Trainer, RslLearner), {"__doc__": rsl_trainer.__doc__})


def train(cfg: TrainConfig, progress: bool = True) -> dict:
    """Train one run (see `Trainer.train`; the run folder is released at the end); returns its
    result dict."""
    with Trainer(cfg, progress=progress) as trainer:
        return trainer.train()
