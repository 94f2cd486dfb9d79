"""From what a user asked for to what runs: the gate of a run, and the evaluate command's rules.

`TRAIN_FLAGS` declares `python -m fightlab train`'s flags once; `TrainRequest` holds what was
given; `plan_training` turns it into a TrainConfig (a resume's segment, the backend / device
pair, the CPU layout presets, `--set`, `--nworld auto`). Every run, from the command line, a
notebook, a batch job or a library call, then passes `plan_run`, the gate, once before any work;
its `TrainPlan` is what the `Trainer` and the training row trust. `EvalRequest` /
`evaluate_request` do the same for `python -m fightlab evaluate`.

Every refusal is a `ConfigError`: one line naming the flag, the value and the choices.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable

from fightlab.config import (TrainConfig, apply_overrides, from_dict, validate_backend, validate_body,
                             validate_nworld, validate_policy_device, validate_train)
from fightlab.errors import ConfigError
from fightlab.paths import RUNS
from fightlab.publish import MIN_PUBLISH_NWORLD, refuse_publish
from fightlab.rundir import check_folder

#: most episodes per world an evaluation may ask for (10 s each)
MAX_EVAL_EPISODES = 10_000

_SEED_RULE = TrainConfig.__dataclass_fields__["seed"].metadata["rule"]  # evaluate's --seed passes it too

#: --cpu-layout presets
CPU_LAYOUTS = ("all-cores", "original")

#: --backend's other names: warp = gpu (MuJoCo Warp), mujoco = cpu (MuJoCo's C engine); rows say gpu / cpu
BACKEND_ALIASES = {"warp": "gpu", "mujoco": "cpu"}

@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag of `python -m fightlab train`, declared once (:data:`TRAIN_FLAGS`): its
    `TrainRequest` field (`name`), its option, the TrainConfig field it sets (None: none, or
    several), whether `plan_training` takes its value as given (`plain`: the config's default
    when not given), and argparse's ``add_argument`` keywords (help, type, action)."""

    name: str
    option: str
    field: str | None
    argparse: dict
    plain: bool = False

    @property
    def dest(self) -> str:
        """argparse's attribute for it."""
        return self.option[2:].replace("-", "_")

    @property
    def default(self):
        """`TrainRequest`'s "not given": False for a switch, () for --set, else None."""
        return False if self.argparse.get("action") == "store_true" else () if self.name == "overrides" else None


def layout_flags(nworld_flag: str) -> dict[str, dict]:
    """The CPU backend's layout flags (train and compare-backends), option → argparse keywords;
    `nworld_flag` names the command's world count."""
    return {
        "--workers": dict(default=None, help="CPU backend: threads W of the C engine's pool (default: every core)"),
        "--worlds-per-worker": dict(default=None, help="CPU backend: worlds K per worker; nworld = W × K "
                                    f"(default: {nworld_flag} / W)"),
        "--cpu-layout": dict(default=None, help="CPU backend preset: 'original' = the original study's 72 "
                             f"workers × 6 worlds = 432 (no --workers / --worlds-per-worker, {nworld_flag} only "
                             "432); 'all-cores' (the default) = W every core (no --workers)")}


def _learner_flags() -> list[Flag]:
    """train's flags of who learns and what tracks it (`TrainConfig.learner`, `.logger`)."""
    return [
        Flag("learner", "--learner", "learner", dict(default=None, help="who learns the task: fightlab (its "
             "PPO, the default) or rsl_rl (rsl_rl's OnPolicyRunner through the same door, mjlab's G1 settings; "
             "needs rsl-rl-lib: pip install -e '.[rsl]')"), plain=True),
        Flag("logger", "--logger", "logger", dict(default=None, help="run tracking: tensorboard (every row's "
             "numbers as scalars, event files in the run folder: tensorboard --logdir runs/train), wandb (offline unless "
             "WANDB_MODE=online; needs pip install wandb), none, or auto (the default: tensorboard where it is "
             "installed); rows.csv either way"),
             plain=True)]


def _train_flags() -> tuple[Flag, ...]:
    from fightlab.bodies import BODY_NAMES

    d = TrainConfig()
    layout = layout_flags("--nworld")
    flags = [
        Flag("body", "--body", "body", dict(default=None, help=f"one of: {', '.join(BODY_NAMES)} (default {d.body})")),
        Flag("nworld", "--nworld", "nworld", dict(default=None, help="parallel worlds, a positive integer, or auto "
             "(GPU: a short ramp against the committed world sweep, fightlab.measure.sweep) "
             f"(default {d.nworld})")),
        Flag("device", "--device", "device", dict(default=None, help="cpu, cuda or cuda:N (default: cuda:0 if "
             "present, else cpu)")),
        Flag("seed", "--seed", "seed", dict(type=int, default=None, help=f"torch and env seed (default {d.seed})"),
             plain=True),
        Flag("max_iterations", "--max-iterations", "max_iterations", dict(
            type=int, default=None, help=f"stop unsolved after this many iterations (default {d.max_iterations}, "
            "or the checkpoint's)"), plain=True),
        Flag("run_dir", "--run-dir", "run_dir", dict(default=None, help="default runs/train/<body>-<nworld>-s<seed> "
             "in the repository; a resumed run stays in its checkpoint's folder. A fresh run refuses a non-empty "
             "folder that fightlab did not make, and deletes only files fightlab wrote")),
        Flag("resume", "--resume", "resume", dict(default=None, help="checkpoint to continue from")),
        Flag("segment_s", "--segment-s", "segment_s", dict(
            type=float, default=None, help="stop (with a checkpoint) after this many seconds; continue with "
            "--resume"), plain=True),
        Flag("checkpoint_every", "--checkpoint-every", "checkpoint_every", dict(
            type=int, default=None, help="iterations between checkpoints, 0: only at the end (default "
            f"{d.checkpoint_every}, or the checkpoint's)"), plain=True),
        Flag("no_graph", "--no-graph", None, dict(action="store_true", help="no graphs at all: every env step, "
             "policy step and update launched eagerly")),
        Flag("no_env_graph", "--no-env-graph", "graph", dict(action="store_true", help="do not capture the env "
             "step as a warp graph")),
        Flag("no_policy_graph", "--no-policy-graph", "policy_graph", dict(
            action="store_true", help="do not capture the rollout's torch work between env steps as CUDA graphs")),
        Flag("no_update_graph", "--no-update-graph", "update_graph", dict(
            action="store_true", help="do not capture the PPO update as a CUDA graph")),
        Flag("no_tree_factor", "--no-tree-factor", "tree_factor", dict(
            action="store_true", help="use MuJoCo Warp's per-level sparse factorization for trees over 64 DOF "
            "instead of fightlab's single-launch kernel")),
        Flag("backend", "--backend", "backend", dict(default=None, help="the env's physics: gpu = MuJoCo Warp on "
             "--device (a GPU, or warp's CPU device for smoke checks: the default, also on a machine without a "
             "GPU); cpu = MuJoCo's C engine on a thread pool (the env's kernels and the policy on the CPU; needs "
             "--device cpu, its default). Aliases: warp = gpu, mujoco = cpu. Rows record backend gpu/cpu and "
             "physics in words")),
        Flag("workers", "--workers", "workers", layout["--workers"]),
        Flag("worlds_per_worker", "--worlds-per-worker", "worlds_per_worker", layout["--worlds-per-worker"]),
        Flag("cpu_layout", "--cpu-layout", None, layout["--cpu-layout"]),
        Flag("policy_device", "--policy-device", "policy_device", dict(default=None, help="CPU backend: where "
             "torch's policy and PPO update run, e.g. cuda:0 (the env's observation, reward and done copied "
             "there and the action back at every env step; default: on the CPU, as on the original's GPU-less "
             "CPU machine)")), *_learner_flags()]
    own = sorted(f.field for f in flags if f.field)
    flags.append(Flag("overrides", "--set", None, dict(
        action="append", default=[], metavar="KEY=VALUE", help="override a config field (typed like its "
        "default), e.g. --set ppo.learning_rate=3e-4 --set env.push_impulse_ns=[20,40]; fields with their "
        f"own flag ({', '.join(own)}) are set by that flag only")))
    flags.append(Flag("publish", "--publish", None, dict(
        action="store_true", help="a GPU, or --backend cpu (its row names the CPU model and cores): append the "
        "result row to data/results/train.csv and the curve to data/curves/ (never MuJoCo Warp on warp's CPU "
        "device)")))
    return tuple(flags)


#: train's flags, in the order --help lists them: the one declaration the parser
#: (`cli._parser`), `TrainRequest`, `FLAG_FIELDS` and `plan_training`'s config are made from
TRAIN_FLAGS = _train_flags()
#: TrainConfig fields with a flag of their own (`--set` refuses them), to the flag
OWN_FLAGS = {f.field: f.option for f in TRAIN_FLAGS if f.field}
FLAG_FIELDS = tuple(OWN_FLAGS)
#: the boolean fields' switches
BOOL_FLAGS = {k: v for k, v in OWN_FLAGS.items() if v.startswith("--no-")}


def _graphs(self, none_if_unset: bool = False) -> dict:
    """graph / policy_graph / update_graph: `no_graph` turns all off, each `no_*` its own;
    with `none_if_unset` a graph whose switch is off is None (a resume keeps the saved)."""
    off = {"graph": self.no_env_graph, "policy_graph": self.no_policy_graph,
           "update_graph": self.no_update_graph}
    return {k: False if (self.no_graph or v) else (None if none_if_unset else True) for k, v in off.items()}


def _plain(self) -> dict:
    """The TrainConfig fields given as they are (`Flag.plain`), those given only."""
    return {f.field: getattr(self, f.name) for f in TRAIN_FLAGS if f.plain and getattr(self, f.name) is not None}


TrainRequest = dataclasses.make_dataclass(
    "TrainRequest", [(f.name, Any, dataclasses.field(default=f.default)) for f in TRAIN_FLAGS], frozen=True,
    namespace=dict(graphs=_graphs, plain=_plain, __module__=__name__, __doc__="""What the train command was
    given, one field per flag of :data:`TRAIN_FLAGS` (named as its `Flag.name`); None (False for a
    switch, () for `overrides`): not given. `nworld` is text or an int ("auto": `plan_training`'s
    `pick_nworld`); `workers` and `worlds_per_worker` text or ints; `overrides` the `--set
    KEY=VALUE` items, in order."""))


def request_from_args(args) -> "TrainRequest":
    """The `TrainRequest` of argparse's namespace for train (:data:`TRAIN_FLAGS`' dests)."""
    return TrainRequest(**{f.name: tuple(getattr(args, f.dest)) if f.name == "overrides" else getattr(args, f.dest)
                           for f in TRAIN_FLAGS})


@dataclasses.dataclass(frozen=True)
class TrainPlan:
    """The gate's answer (:func:`plan_run`), trusted as it is: the run's config (checked,
    canonical; a resume's: the checkpoint's with the segment's fields), how it starts
    (:data:`STARTS`), the resumed checkpoint (loaded once), whether it publishes, and for
    `--nworld auto` the pick's record (the row's `params.nworld_auto`)."""

    cfg: TrainConfig
    nworld_auto: dict | None = None
    start: str = "fresh"
    checkpoint: dict | None = None
    publish: bool = False


def plan_run(cfg: TrainConfig, *, publish: bool = False, has_row: Callable | None = None,
             nworld_auto: dict | None = None, checkpoint: dict | None = None,
             device_here: bool = True, folder: bool = False) -> TrainPlan:
    """The gate of a run: every request (the command line's flags, a notebook's parameters, a
    batch job, a resume, a library call) ends here, once, before any work: a resume's checkpoint
    merged (`cfg.resume`: its config, only the segment's fields from `cfg`), the config
    validated (`config.validate_train`), the publish rule applied (`publish.refuse_publish` with
    the whole training), the start decided (:data:`STARTS`).

    Args:
      cfg: the run's TrainConfig; publish: the run's row and curve go to data/.
      has_row: ``(folder, run_id) -> bool`` (`measure.report.has_train_row`), asked only for a
        finished checkpoint: without its row the run writes it ("row"); with it, or without
        `has_row`, the resume is refused.
      nworld_auto: `--nworld auto`'s record, kept in the plan.
      checkpoint: `cfg.resume` already loaded (else loaded here).
      device_here: False checks the config as if its devices were the CPU (a batch job runs on
        a lane's device, known when it starts); the publish rule still reads `cfg.device`.
      folder: refuse the run folder now as the run would (`rundir.check_folder`).
    Raises:
      ConfigError: one line (a refused value, a run that may not publish, a finished run, a
        checkpoint with later ones in its folder); CheckpointError: an unreadable checkpoint.
    """
    ck = None
    if cfg.resume:
        from fightlab.run.checkpoint import load_checkpoint, resume_config

        ck = checkpoint if checkpoint is not None else load_checkpoint(cfg.resume, any_learner=True)
        cfg = resume_config(from_dict(ck["config"]), cfg)
    here = {} if device_here else dict(device="cpu", policy_device=cfg.policy_device and "cpu")
    checked = validate_train(dataclasses.replace(cfg, **here))
    if here:  # checked as if on the CPU; the run's own devices kept
        checked = dataclasses.replace(checked, device=cfg.device, policy_device=cfg.policy_device)
    refuse_publish([dict(publish=publish, device=checked.device, what="the training row", backend=checked.backend,
                         policy_device=checked.policy_device, training=checked)])
    from fightlab.run.tracking import check_logger  # the learner's and the tracker's packages

    check_logger(checked.logger)
    if checked.learner == "rsl_rl":
        from fightlab.run.rsl import check_rsl  # rsl_rl importable, the settings it takes

        check_rsl(checked)
    start = "fresh" if ck is None else _resume_start(checked, ck, has_row)
    if folder:  # the last refusal: a run past the gate says its first line (a task warning) after it
        check_folder(checked.run_dir, fresh=ck is None)
    return TrainPlan(checked, nworld_auto, start, ck, publish)


def _resume_start(cfg: TrainConfig, ck: dict, has_row: Callable | None) -> str:
    """How a resumed run starts (:data:`STARTS`), said in one line where it does not train on.
    Raises ConfigError: finished (its row written, or no `has_row`), or later checkpoints in its
    folder that resuming there would overwrite."""
    from fightlab.config import stage_done
    from fightlab.run.checkpoint import later_checkpoints

    it, cur = ck["iteration"], ck["curriculum"]
    solved = bool(cur.get("solved"))
    done = solved and cfg.stop_when_solved
    unchecked = solved and ck.get("reference_eval") is None
    start = "resume"
    if not solved and stage_done(cfg, int(cur.get("stage", 0))):
        # ended by stop_after_stage (its row may be missing: a segment or a kill ended on the
        # widening): this segment trains no further, it writes the run's row
        print(f"run in {cfg.resume!r} stopped after stage {cfg.stop_after_stage} at iteration {it} "
              "(its stop_after_stage): writing its row, no training", flush=True)
        start = "row"
    elif (done or it >= cfg.max_iterations) and has_row is not None \
            and not has_row(Path(cfg.resume).resolve().parent, ck["run_id"]):
        # finished but its row never written (stopped on its last iteration by an older
        # fightlab, a kill between the last checkpoint and the row): write it, no training
        print(f"run in {cfg.resume!r} finished at iteration {it} without its row: writing it, no training",
              flush=True)
        start = "check" if unchecked else "row"
    elif done or it >= cfg.max_iterations:
        if not unchecked:
            raise ConfigError(f"run in {cfg.resume!r} already finished at iteration {it} (solved, its "
                              "reference check done)" if done else
                              f"run in {cfg.resume!r} already finished at iteration {it} (max_iterations "
                              "reached); raise --max-iterations to train it further")
        start = "check"  # stopped (Ctrl-C, kill) between the solve and the end of its reference check
    if start == "check":
        print(f"run in {cfg.resume!r} solved at iteration {it} but its reference check did not finish: "
              "running the check", flush=True)
    if later := later_checkpoints(cfg.run_dir, int(it)):
        # the folder went on past this checkpoint: resuming here would write over that
        raise ConfigError(
            f"checkpoint {cfg.resume!r} is at iteration {it} but its folder holds later ones "
            f"({', '.join(later[:3])}{', …' if len(later) > 3 else ''}) that resuming it there would "
            "overwrite: resume latest.pt, or copy this checkpoint into a new empty folder and resume "
            "it from there (a new run, forked from this one)")
    return start


def _given(value, default):
    """`value` unless it was not given (None): an empty string is a value, not a default."""
    return default if value is None else value


def positive(flag: str, value) -> int | None:
    """A command-line count: None if not given, else a positive int (ConfigError naming `flag`)."""
    if value is None:
        return None
    try:
        v = int(str(value).strip())
    except ValueError:
        v = None
    if v is None or v <= 0 or str(v) != str(value).strip():
        raise ConfigError(f"{flag} must be a positive integer, got {value!r}")
    return v


def resolve_backend(backend) -> str | None:
    """`--backend` as the config says it ("gpu" / "cpu"; :data:`BACKEND_ALIASES` accepted), or None."""
    return None if backend is None else validate_backend(BACKEND_ALIASES.get(backend, backend))


def cpu_layout(req: TrainRequest, backend: str) -> tuple[int, dict]:
    """(nworld, TrainConfig's workers / worlds_per_worker) from the request's nworld, workers,
    worlds_per_worker and cpu_layout; more workers than cores warns (`sim.cpu.layout`).
    `original` (W = 72, K = 6: 432 worlds) refuses workers, worlds_per_worker and another
    nworld; `all-cores` (W = every core) refuses workers; the "gpu" backend refuses all three."""
    from fightlab.meta import cpu_count

    w = positive("--workers", req.workers)
    k = positive("--worlds-per-worker", req.worlds_per_worker)
    preset = req.cpu_layout
    if preset is not None and preset not in CPU_LAYOUTS:
        raise ConfigError(f"--cpu-layout must be one of {', '.join(CPU_LAYOUTS)}, got {preset!r}")
    if backend != "cpu":
        if w is not None or k is not None or preset is not None:
            raise ConfigError("--workers, --worlds-per-worker and --cpu-layout are the CPU "
                              "backend's layout: they need --backend cpu")
        return validate_nworld(_given(req.nworld, TrainConfig().nworld)), {}
    nworld = None if req.nworld is None else validate_nworld(req.nworld)
    if preset == "original":
        from fightlab.sim.cpu import ORIGINAL_LAYOUT

        ow, ok = ORIGINAL_LAYOUT
        said = f"--cpu-layout original is {ow} workers × {ok} worlds = {ow * ok} worlds"
        if w is not None or k is not None:
            given = " and ".join(f for f, v in (("--workers", w), ("--worlds-per-worker", k)) if v is not None)
            raise ConfigError(f"{said}; {given} conflicts (give the preset or the flags, not both)")
        if nworld is not None and nworld != ow * ok:
            raise ConfigError(f"{said}; --nworld {nworld} conflicts")
        w, k = ow, ok
    elif preset == "all-cores":
        if w is not None:
            raise ConfigError(f"--cpu-layout all-cores is {cpu_count()} workers (every core); --workers "
                              f"{w} conflicts (give the preset or --workers, not both)")
        w = cpu_count()
        if k is not None and nworld is not None and nworld != w * k:
            raise ConfigError(f"--cpu-layout all-cores is {w} workers (every core); --worlds-per-worker "
                              f"{k} × {w} = {w * k} worlds; --nworld {nworld} conflicts")
    if w is not None and k is not None and nworld is not None and nworld != w * k:
        raise ConfigError(f"--nworld {nworld} conflicts with --workers {w} × --worlds-per-worker "
                          f"{k} = {w * k}")
    if k is not None and w is None and nworld is not None:
        raise ConfigError("--worlds-per-worker with --nworld needs --workers too (nworld = W × K)")
    from fightlab.sim.cpu import layout

    if k is not None:
        w, k, n = layout(w, k)
    else:  # K is nworld / W where W divides nworld; else none (the workers' shares differ by one)
        w, k, n = layout(w, None, _given(nworld, TrainConfig().nworld))
        if n != w * k:
            k = None
    return n, dict(workers=w, worlds_per_worker=k)


def plan_overrides(cfg: TrainConfig, items) -> TrainConfig:
    """`config.apply_overrides` as train's `--set` reads them: fields with a flag of their own
    (:data:`FLAG_FIELDS`) refused, the message naming the flag."""
    return apply_overrides(cfg, list(items), own_flags=OWN_FLAGS)


#: what a resume's refusals say may change (`run.checkpoint.SEGMENT_FIELDS`' flags)
_PER_SEGMENT = "only --device, --max-iterations, --segment-s, --logger and --no-progress may change per segment"


def _resumed(req: TrainRequest, saved: TrainConfig, device: str, policy_device) -> TrainConfig:
    """A resumed run's segment: the request's segment fields; any other flag the request gives
    must agree with the checkpoint (`run.checkpoint.resume_conflicts`)."""
    from fightlab.run.checkpoint import resume_conflicts

    if req.overrides:
        raise ConfigError("--set cannot change a resumed run's config; start a new run instead")
    if req.cpu_layout:  # its workers and worlds per worker are the checkpoint's
        raise ConfigError(f"--cpu-layout {req.cpu_layout} conflicts with --resume: a resumed run keeps its "
                          f"checkpoint's layout ({_PER_SEGMENT})")
    given = {k: v for k, v in dict(
        body=req.body, nworld=None if req.nworld is None else validate_nworld(req.nworld), seed=req.seed,
        checkpoint_every=req.checkpoint_every, **req.graphs(none_if_unset=True),
        tree_factor=False if req.no_tree_factor else None,
        workers=positive("--workers", req.workers),
        worlds_per_worker=positive("--worlds-per-worker", req.worlds_per_worker),
        policy_device=policy_device, learner=req.learner,
        run_dir=None if req.run_dir is None else str(Path(req.run_dir).resolve())).items()
        if v is not None}
    saved_dir = str(Path(req.resume).resolve().parent)
    conflicts = resume_conflicts(dataclasses.replace(saved, run_dir=saved_dir), given)
    if conflicts:
        flag = dict(BOOL_FLAGS)
        if req.no_graph:  # the flag the user typed, not the three it stands for
            flag.update(graph="--no-graph", policy_graph="--no-graph", update_graph="--no-graph")
        said = "; ".join(f"{flag[k]} conflicts with the checkpoint ({k}={have})" if k in flag
                         else f"--{k.replace('_', '-')} {v} conflicts with the checkpoint ({have})"
                         for k, v, have in conflicts)
        raise ConfigError(f"{said}: a resumed run keeps every setting of its checkpoint ({_PER_SEGMENT})")
    return TrainConfig(resume=req.resume, device=device, segment_s=req.segment_s,
                       logger=_given(req.logger, saved.logger),
                       max_iterations=_given(req.max_iterations, saved.max_iterations))


def _resumed_checkpoint(req: TrainRequest, backend: str | None) -> dict:
    """The checkpoint `req.resume` names, loaded (a clear error before any work); a `--backend`
    other than its own refused."""
    from fightlab.run.checkpoint import load_checkpoint

    if not req.resume.strip():
        raise ConfigError(f"--resume must name a checkpoint file, got {req.resume!r}")
    ck = load_checkpoint(req.resume, any_learner=True)
    saved = from_dict(ck["config"])
    if backend is not None and backend != saved.backend:
        raise ConfigError(f"--backend {backend} conflicts with the checkpoint (backend={saved.backend}): "
                          f"a resumed run keeps its physics backend ({_PER_SEGMENT})")
    return ck


def _devices(req: TrainRequest, backend: str, here: bool) -> tuple[str | None, str | None]:
    """(device, policy_device) of a request on `backend`; not `here` (a batch job): as given,
    its lane's when it names none (None)."""
    from fightlab import devices

    if backend == "cpu" and req.device is not None and req.device.strip().lower() != "cpu":
        # the pairing first: on a machine without a GPU, "no CUDA GPU" would hide the real mistake
        raise ConfigError(f"--backend cpu needs --device cpu (MuJoCo's C engine; the env's kernels "
                          f"and the policy run on the CPU), got --device {req.device!r}")
    if not here:
        return _given(req.device, "cpu" if backend == "cpu" else None), req.policy_device
    device = devices.validate_device(_given(req.device, "cpu" if backend == "cpu" else devices.default_device()))
    return device, validate_policy_device(req.policy_device, backend)


def plan_training(req: TrainRequest, *, pick_nworld: Callable | None = None,
                  progress: bool = True, has_row: Callable | None = None, device_here: bool = True) -> TrainPlan:
    """The command line's request as a run's config, through the gate (:func:`plan_run`).

    Args:
      pick_nworld: for ``nworld="auto"``, ``(probe: TrainConfig, progress: bool) -> (nworld,
        record)``; None refuses "auto". The probe passes the gate first (at
        `MIN_PUBLISH_NWORLD` worlds), so a refusal comes before the ramp's work.
      progress: passed to `pick_nworld`; has_row: to :func:`plan_run`.
      device_here: False for a batch job, checked before it runs on a lane: its devices are
        not looked for on this host, and a job naming no device meets the publish rule when it
        starts.
    Raises:
      ConfigError: one line naming the flag and the value (a resume conflict, a backend / device
        pair, a CPU layout, a `--set` item, a run that may not publish, "auto" where it cannot be).
    """
    backend = resolve_backend(req.backend)
    ck = _resumed_checkpoint(req, backend) if req.resume is not None else None
    saved = None if ck is None else from_dict(ck["config"])
    backend = _given(backend, "gpu") if saved is None else saved.backend
    device, policy_device = _devices(req, backend, device_here)
    # the publish rule where the device is known (a batch job naming none: when it starts)
    publish = req.publish and device is not None
    auto = isinstance(req.nworld, str) and req.nworld.strip().lower() == "auto"
    if auto and req.resume is not None:
        raise ConfigError("--nworld auto picks the world count of a new run; a resumed run keeps its "
                          "checkpoint's")
    if saved is not None:
        return plan_run(_resumed(req, saved, device, policy_device), publish=publish, has_row=has_row,
                        checkpoint=ck, device_here=device_here, folder=device_here)
    dflt = TrainConfig()
    body = validate_body(_given(req.body, dflt.body))
    seed = _given(req.seed, dflt.seed)
    given = dict(req.plain(), body=body, device=device, **req.graphs(), tree_factor=not req.no_tree_factor,
                 backend=backend, policy_device=policy_device)
    nworld_auto = None
    if auto:
        if backend != "gpu" or req.workers is not None or req.worlds_per_worker is not None or req.cpu_layout:
            raise ConfigError("--nworld auto picks the world count for MuJoCo Warp on a GPU; with "
                              "--backend cpu give --nworld or --workers / --worlds-per-worker")
        if pick_nworld is None:
            raise ConfigError("--nworld auto needs the ramp's measurement; give --nworld N")
        probe = plan_run(plan_overrides(TrainConfig(nworld=MIN_PUBLISH_NWORLD, **given), req.overrides),
                         publish=publish, device_here=device_here).cfg
        nworld, nworld_auto = pick_nworld(probe, progress)
        layout = {}
    else:
        nworld, layout = cpu_layout(req, backend)
    run_dir = _given(req.run_dir, str(RUNS / "train" / f"{body}-{nworld}-s{seed}"))
    if not str(run_dir).strip():
        raise ConfigError(f"--run-dir must name a folder, got {run_dir!r}")
    cfg = plan_overrides(TrainConfig(nworld=nworld, run_dir=run_dir, **given, **layout), req.overrides)
    return plan_run(cfg, publish=publish, nworld_auto=nworld_auto, device_here=device_here, folder=device_here)


@dataclasses.dataclass(frozen=True)
class EvalRequest:
    """What `python -m fightlab evaluate` was given, named as its flags (None: not given)."""

    checkpoint: str | None = None
    body: str | None = None
    nworld: int | str | None = None
    device: str | None = None
    episodes: float = 1.0
    timestep: float | None = None
    zero_action: bool = False
    amplitude: float = 1.0
    seed: int = 1
    physics: str | None = None  # None: "training" (told apart from a --physics given)
    reference_check: bool = False
    publish: bool = False
    policy: str | None = None  # an exported policy file instead of a checkpoint (run.evaluate.evaluate_exported)
    backend: str | None = None  # with policy: the physics (None: its run's)


def evaluate_request(req: EvalRequest, progress: bool = True) -> tuple[str, dict, str]:
    """Check an evaluate request and run it: the reference check of a checkpoint
    (`run.reference.reference_check`), a checkpoint's policy or the zero-action policy
    (`run.evaluate.evaluate`, `evaluate_zero_action`).

    Returns:
      (kind, result, device): kind "reference" (the check's dict) or "evaluate" (evaluate's
      dict; `evaluate_exported`'s for `req.policy`); device the canonical device it ran on.
    Raises:
      ConfigError: one line naming the flag and the value; CheckpointError: an unreadable
        checkpoint.
    """
    from fightlab import devices
    from fightlab.config import EnvConfig, reference_env
    from fightlab.bodies import BODY_NAMES
    from fightlab.run.evaluate import (DEFAULT_NWORLD, PHYSICS, evaluate, evaluate_zero_action, exported_request,
                                       publish_size)

    nworld = None if req.nworld is None else validate_nworld(req.nworld)  # None: the checkpoint's
    physics = "training" if req.physics is None else req.physics
    if physics not in PHYSICS:
        raise ConfigError(f"--physics must be one of {', '.join(PHYSICS)}, got {req.physics!r}")
    _SEED_RULE.check("--seed", req.seed)  # train's rule for the seed, TrainConfig.seed's
    device = devices.pick_device(req.device)
    if req.checkpoint is not None and not req.checkpoint.strip():
        raise ConfigError(f"evaluate needs a CHECKPOINT file, got {req.checkpoint!r}")
    if req.reference_check:
        return "reference", _reference_request(req, nworld, device, progress), device
    if not 0.0 <= req.amplitude <= 1.0:
        raise ConfigError(f"--amplitude must be in [0, 1], got {req.amplitude!r}")
    if not (math.isfinite(req.episodes) and 1.0 <= req.episodes <= MAX_EVAL_EPISODES):
        raise ConfigError(f"--episodes must be in [1, {MAX_EVAL_EPISODES}] (episodes of 10 s per world), "
                          f"got {req.episodes!r}")
    if req.timestep is not None and not req.timestep > 0:
        raise ConfigError(f"--timestep must be a positive number of seconds, got {req.timestep!r}")
    if req.publish:  # at least publish.MIN_PUBLISH_NWORLD worlds: fewer is a smoke check
        publish_size(req.policy, _checkpoint_config(req).nworld if req.checkpoint and nworld is None else nworld)
    if req.policy is not None or req.backend is not None:  # an exported policy, in onnxruntime
        return "evaluate", exported_request(req, nworld, device, physics, progress), device
    if req.checkpoint is None:
        if not (req.zero_action and req.body is not None):
            raise ConfigError("evaluate needs a CHECKPOINT, or --zero-action with --body B "
                              f"(valid bodies: {', '.join(BODY_NAMES)})")
        env_cfg = reference_env(EnvConfig()) if physics == "reference" else EnvConfig()
        res = evaluate_zero_action(validate_body(req.body), nworld=DEFAULT_NWORLD if nworld is None else nworld,
                                   device=device, episodes_per_world=req.episodes, amplitude=req.amplitude,
                                   env_cfg=env_cfg, seed=req.seed, timestep=req.timestep, progress=progress)
        return "evaluate", res, device
    _checkpoint_config(req)
    res = evaluate(req.checkpoint, nworld=nworld, device=device, episodes_per_world=req.episodes,
                   timestep=req.timestep, zero_action=req.zero_action, amplitude=req.amplitude,
                   seed=req.seed, progress=progress, physics=physics)
    return "evaluate", res, device


def _reference_request(req: EvalRequest, nworld: int | None, device: str, progress: bool) -> dict:
    """`evaluate --reference-check`: the check of the request's checkpoint (its dict); the flags
    the check sets itself refused (ConfigError)."""
    from fightlab.run.reference import REFERENCE_NWORLD, reference_check

    given = [f for f, v in (("--zero-action", req.zero_action), ("--timestep", req.timestep is not None),
                            ("--publish", req.publish), ("--physics", req.physics is not None),
                            ("--episodes", req.episodes != 1.0), ("--amplitude", req.amplitude != 1.0)) if v]
    if given:
        raise ConfigError(f"--reference-check runs the check's own physics, episodes and amplitude; "
                          f"{', '.join(given)} conflicts")
    if req.checkpoint is None:
        raise ConfigError("--reference-check needs a CHECKPOINT file")
    return reference_check(req.checkpoint, _checkpoint_config(req), device,
                           REFERENCE_NWORLD if nworld is None else nworld, seed=req.seed, progress=progress)


def _checkpoint_config(req: EvalRequest):
    """The request's checkpoint's TrainConfig; `--body` must be its body (ConfigError)."""
    from fightlab.run.checkpoint import load_checkpoint

    cfg = from_dict(load_checkpoint(req.checkpoint, any_learner=True)["config"])  # evaluate takes both
    if req.body is not None and req.body != cfg.body:
        raise ConfigError(f"--body {req.body} conflicts with the checkpoint's body ({cfg.body})")
    return cfg
