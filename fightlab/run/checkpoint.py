"""Checkpoints of a training run: saving, loading with every field type-checked, restoring,
and the resume rule (a resumed run keeps every setting of its checkpoint except
:data:`SEGMENT_FIELDS`).

A checkpoint is a ``torch.save`` dict (format ``fightlab-ckpt-1``): config, agent, optimizer,
curriculum, iteration, elapsed_s, the env's ``state_dict``, RNG states, run_id, per-segment
records and the run's rows. No file runs code: it holds only tensors, numbers, strings, None,
lists, tuples and dicts, read with ``torch.load(weights_only=True)``; an older checkpoint's numpy
arrays are read with numpy's array reconstruction allowed and nothing else (torch's advice for
numpy), and any other object (a crafted pickle) is refused in one line before any of it runs.

Retention: a run folder keeps ``latest.pt``, the checkpoint it links to and the
:data:`KEEP_CHECKPOINTS` newest others before it (`prune_checkpoints`); files fightlab did not
write are never touched.
"""

from __future__ import annotations

import collections
import dataclasses
import errno
import math
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import torch

from fightlab.config import (MAX_ITERATIONS, ConfigError, TrainConfig, check_fields, from_dict, short_repr,
                             to_dict, validate_env)
from fightlab.envs.curriculum import WINDOW_KEYS
from fightlab.rl.models import ActorCritic, nonfinite_tensors
from fightlab.rl.ppo import CRITIC_PREFIX, adopt_optimizer_state, optimizer_order
from fightlab.rundir import CHECKPOINT_NAME, atomic_path, write_error

__all__ = ["CheckpointError", "KEEP_CHECKPOINTS", "save_checkpoint", "load_checkpoint", "safe_load",
           "prune_checkpoints", "restore_checkpoint", "later_checkpoints", "relabel_checkpoints",
           "SEGMENT_FIELDS", "resume_conflicts", "resume_config", "load_policy", "policy_agent",
           "policy_parameter_names"]


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable, truncated or not a fightlab checkpoint."""


class _Damaged(Exception):
    """What is wrong in a checkpoint (one clause); `_check_checkpoint` names the file."""


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _clause(e: BaseException, n: int = 200) -> str:
    """``e`` as one clause: its type and its first sentence (torch's go on with advice), at most n."""
    first = (str(e).strip().splitlines() or [""])[0]
    first = re.split(r"(?<=[^.\s]{2})\.\s", first, maxsplit=1)[0].rstrip(".")
    return f"{type(e).__name__}: {first[:n]}" if first else type(e).__name__


def _big(v) -> str:
    """A value for a message; an integer too long to print (Python's 4300 digits) by its size."""
    return f"an integer of {v.bit_length()} bits" if isinstance(v, int) and v.bit_length() > 200 else short_repr(v)


def _scalar(v):
    """A one-element tensor's value, anything else as it is (an optimizer's lr, betas, step)."""
    return v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v


def _check_checkpoint(p: Path, ck: dict, any_learner: bool) -> None:
    """Types of what a checkpoint holds, checked before anything is built from it.
    Raises CheckpointError naming the file and the first thing damaged, or another learner's
    checkpoint where only fightlab's learner's is taken (``any_learner`` False)."""
    try:
        cfg = _check_config(ck)
    except _Damaged as e:
        raise CheckpointError(f"checkpoint {str(p)!r} is damaged or hand-edited: {e}") from None
    if cfg.learner != "fightlab" and not any_learner:  # its agent is another learner's (run.rsl)
        raise CheckpointError(f"checkpoint {str(p)!r} is a --learner {cfg.learner} run's: render and the reference "
                              "check take fightlab's learner's only (evaluate, export and resume take both)")
    try:
        (_check_learner if cfg.learner == "fightlab" else _check_tensors)(ck, cfg)
        _check_curriculum(ck)
        _check_run(ck)
    except _Damaged as e:
        raise CheckpointError(f"checkpoint {str(p)!r} is damaged or hand-edited: {e}") from None


def _check_config(ck: dict) -> TrainConfig:
    if not isinstance(ck["config"], dict):
        raise _Damaged(f"config must be a dict, got {type(ck['config']).__name__}")
    try:
        cfg = from_dict(ck["config"])
        # the file's own values (each field's rule, the env's physics), not this machine's
        # devices: a run of another machine's GPU is checked as if it were on the CPU; whether
        # the GPU is here, and the rules across a run's fields, the gate (`run.launch.plan_run`)
        # says when the run resumes
        pd = cfg.policy_device
        if pd is not None and not (isinstance(pd, str) and re.fullmatch(r"cpu|cuda(:[0-9]+)?", pd.strip().lower())):
            raise ConfigError(f"policy_device must be cpu, cuda or cuda:N, got {pd!r}")
        check_fields(dataclasses.replace(cfg, device="cpu"))
        validate_env(cfg.env)
    except (ConfigError, TypeError, ValueError) as e:
        raise _Damaged(f"config: {e}") from None
    return cfg


def _check_learner(ck: dict, cfg: TrainConfig) -> None:
    """The agent's tensors and the optimizer's state, its groups those of the config."""
    for k in ("agent", "optimizer"):
        if not isinstance(ck[k], dict):
            raise _Damaged(f"{k} must be a state dict, got {type(ck[k]).__name__}")
    if not all(isinstance(v, torch.Tensor) for v in ck["agent"].values()):
        raise _Damaged("agent must map names to tensors")
    if not all(bool(torch.isfinite(v).all()) for v in ck["agent"].values() if v.is_floating_point()):
        raise _Damaged("agent weights are not all finite")
    opt = ck["optimizer"]
    if not (isinstance(opt.get("state"), dict) and isinstance(opt.get("param_groups"), list)
            and all(isinstance(g, dict) for g in opt["param_groups"])):
        raise _Damaged("optimizer must be a torch optimizer state dict (state, param_groups)")
    problem = _optimizer_problem(ck["agent"], opt)
    if problem:
        raise _Damaged(f"optimizer: {problem}")
    # the groups are the config's: one, or the critic's own at ppo.critic_learning_rate
    clr = cfg.ppo.critic_learning_rate
    if len(opt["param_groups"]) != (1 if clr is None else 2):
        raise _Damaged(f"optimizer: {len(opt['param_groups'])} parameter group(s), but the config's "
                       f"ppo.critic_learning_rate {clr!r} makes {1 if clr is None else 2}")
    if clr is not None and float(v := opt["param_groups"][1]["lr"]) != float(clr):
        raise _Damaged(f"optimizer: the critic's group runs at {float(v):g}, the config's "
                       f"ppo.critic_learning_rate is {clr:g}")


def _check_tensors(ck: dict, cfg: TrainConfig) -> None:
    """Another learner's state (`fightlab.run.rsl`): finite tensors, a torch optimizer state dict."""
    agent, opt = ck["agent"], ck["optimizer"]
    if not (isinstance(agent, dict) and all(isinstance(v, torch.Tensor) for v in agent.values())):
        raise _Damaged("agent must map names to tensors")
    if nonfinite_tensors(agent):
        raise _Damaged("agent weights are not all finite")
    if not (isinstance(opt, dict) and isinstance(opt.get("state"), dict)
            and isinstance(opt.get("param_groups"), list)):
        raise _Damaged("optimizer must be a torch optimizer state dict (state, param_groups)")


def _check_curriculum(ck: dict) -> None:
    cur = ck["curriculum"]
    if not isinstance(cur, dict):
        raise _Damaged(f"curriculum must be a dict, got {type(cur).__name__}")
    for k, typ in (("stage", int), ("since_widen", int), ("solved", bool), ("window", list)):
        v = cur.get(k)
        if not isinstance(v, typ) or (typ is int and (isinstance(v, bool) or v < 0)):
            raise _Damaged(f"curriculum[{k!r}] must be {'an integer >= 0' if typ is int else typ.__name__}, "
                           f"got {v!r}")
    n_stages = len(ck["config"].get("curriculum_stages") or ())
    if not cur["stage"] < n_stages:
        raise _Damaged(f"curriculum stage {cur['stage']} is beyond the config's {n_stages} stages")
    if not all(isinstance(w, dict) and set(WINDOW_KEYS) <= set(w)
               and all(_number(w[k]) for k in WINDOW_KEYS) for w in cur["window"]):
        raise _Damaged(f"curriculum window entries must be dicts of numbers with {list(WINDOW_KEYS)}")
    if cur.get("widened_on") is not None and not (isinstance(cur["widened_on"], dict) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in cur["widened_on"].values())):
        raise _Damaged("curriculum['widened_on'] must be a dict of numbers (NaN where none) or null, "
                       f"got {short_repr(cur['widened_on'])}")


def _check_run(ck: dict) -> None:
    """The counters, the env's state, the RNG states, the run's id, segments and rows."""
    it = ck["iteration"]
    if isinstance(it, bool) or not isinstance(it, int) or it < 0:
        raise _Damaged(f"iteration must be an integer >= 0, got {short_repr(it)}")
    if it > MAX_ITERATIONS:  # before any range or list is built of it
        raise _Damaged(f"iteration must be at most {MAX_ITERATIONS} (the config's limit), got {_big(it)}")
    if not _number(ck["elapsed_s"]) or ck["elapsed_s"] < 0:
        raise _Damaged(f"elapsed_s must be a number >= 0, got {ck['elapsed_s']!r}")
    if not (_number(ck.get("amp_target")) and 0.0 <= ck["amp_target"] <= 1.0):
        raise _Damaged(f"amp_target must be a number in [0, 1], got {ck.get('amp_target')!r}")
    for k in ("time_to_solve_s", "compile_s"):
        if ck.get(k) is not None and not _number(ck[k]):
            raise _Damaged(f"{k} must be a number or None, got {ck[k]!r}")
    if ck.get("solve_iteration") is not None and (isinstance(ck["solve_iteration"], bool)
                                                  or not isinstance(ck["solve_iteration"], int)
                                                  or not 0 <= ck["solve_iteration"] <= MAX_ITERATIONS):
        raise _Damaged(f"solve_iteration must be an integer in [0, {MAX_ITERATIONS}] or None, "
                       f"got {_big(ck['solve_iteration'])}")
    if ck.get("forked_from") is not None and not isinstance(ck["forked_from"], str):
        raise _Damaged(f"forked_from must be text or null, got {short_repr(ck['forked_from'])}")
    if "env_state" not in ck or not isinstance(ck["env_state"], dict) or not all(
            isinstance(v, np.ndarray) and (np.issubdtype(v.dtype, np.number) or v.dtype == bool)
            for v in ck["env_state"].values()):
        raise _Damaged("env_state must be a dict of numeric numpy arrays (the simulation state)")
    for k in ("obs", "torch_rng", "gen_state"):
        if not isinstance(ck.get(k), torch.Tensor):
            raise _Damaged(f"{k} must be a tensor, got {type(ck.get(k)).__name__}")
        if k != "obs" and ck[k].dtype != torch.uint8:
            raise _Damaged(f"{k} must be a torch RNG state (uint8 tensor), got {ck[k].dtype}")
    if not (isinstance(ck.get("run_id"), str) and ck["run_id"].isalnum()):
        raise _Damaged(f"run_id must be letters and digits, got {ck.get('run_id')!r}")
    segs = ck.get("segments")
    if segs is not None and not (isinstance(segs, list) and all(isinstance(x, dict) for x in segs)):
        raise _Damaged(f"segments must be a list of dicts, got {segs!r}")
    for x in segs or []:
        for k in ("concurrent", "gpu_jobs", "shared_gpu", "host_jobs"):  # the last two: older names
            if x.get(k) is not None and (isinstance(x[k], bool) or not isinstance(x[k], int)):
                raise _Damaged(f"segments' {k} must be an integer, got {x[k]!r}")
        if x.get("mps") is not None and not isinstance(x["mps"], bool):
            raise _Damaged(f"segments' mps must be true or false, got {x['mps']!r}")
    hist = ck.get("history")
    if hist is not None and not (isinstance(hist, list) and len(hist) == it  # lengths first: no huge list
                                 and all(isinstance(r, dict) for r in hist)
                                 and [r.get("iteration") for r in hist] == list(range(1, it + 1))):
        raise _Damaged(f"history must hold the rows of iterations 1..{it} in order")


def policy_parameter_names(agent_state: dict) -> list[str]:
    """The names of an ActorCritic state dict's parameters in the optimizer's order (the state
    dict's order without the observation normalisers' buffers, ``obs_norm.*`` and an asymmetric
    critic's ``priv_norm.*``)."""
    return [k for k in agent_state if not k.startswith(("obs_norm.", "priv_norm."))]


def _optimizer_problem(agent_state: dict, opt: dict) -> str | None:
    """Why an optimizer state dict does not fit the policy's parameters (one clause), or None:
    one parameter group listing one index per parameter, or two (the actor's and log-std, then
    the critic's: `fightlab.rl.ppo.optimizer_order`), each group Adam's (:func:`_group_problem`)
    and each parameter's state its own (:func:`_moments_problem`)."""
    names = policy_parameter_names(agent_state)
    groups = [g.get("params") for g in opt["param_groups"]]
    if not all(isinstance(ps, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ps)
               for ps in groups):
        return f"param_groups' params must be lists of parameter indices, got {groups!r}"[:200]
    if len(opt["param_groups"]) not in (1, 2):
        return f"{len(opt['param_groups'])} parameter groups, fightlab's Adam has one or two"
    if len(groups) == 2:
        ncritic = sum(n.startswith(CRITIC_PREFIX) for n in names)
        if len(groups[1]) != ncritic:
            return (f"the second parameter group lists {len(groups[1])} parameters, the critic "
                    f"has {ncritic}")
    names = optimizer_order(names, len(groups))
    for g in opt["param_groups"]:
        if problem := _group_problem(g):
            return problem
    ids = [i for ps in groups for i in ps]
    if len(ids) != len(names):
        return f"{len(ids)} parameters listed, the policy has {len(names)}"
    for i, name in zip(ids, names):
        if problem := _moments_problem(f"parameter {i} ({name})", opt["state"].get(i, {}), agent_state[name]):
            return problem
    return None


def _group_problem(g: dict) -> str | None:
    """Why a parameter group's hyper-parameters are not Adam's (lr, eps > 0, weight_decay >= 0,
    betas in [0, 1)), or None."""
    for k, ok, rule in (("lr", lambda v: v > 0, "> 0"), ("eps", lambda v: v > 0, "> 0"),
                        ("weight_decay", lambda v: v >= 0, ">= 0")):
        if k not in g:
            return f"param_groups' {k} is missing"
        v = _scalar(g[k])
        if not _number(v) or not ok(v):
            return f"param_groups' {k} must be a number {rule}, got {g[k]!r}"[:200]
    if not (isinstance(g.get("betas"), (tuple, list)) and len(g["betas"]) == 2
            and all(_number(_scalar(b)) and 0 <= _scalar(b) < 1 for b in g["betas"])):
        return f"param_groups' betas must be a pair of numbers in [0, 1), got {g.get('betas')!r}"[:200]
    return None


def _moments_problem(what: str, st, param: torch.Tensor) -> str | None:
    """Why one parameter's Adam state (`what` names it) does not fit `param`, or None."""
    if not isinstance(st, dict):
        return f"the state of {what} must be a dict, got {type(st).__name__}"
    step = st.get("step")
    if step is not None and (not _number(_scalar(step)) or _scalar(step) < 0):
        return f"step of {what} must be a number >= 0, got {step!r}"[:200]
    for k in ("exp_avg", "exp_avg_sq"):
        v = st.get(k)
        if v is None:
            continue
        if not isinstance(v, torch.Tensor):
            return f"{k} of {what} must be a tensor, got {type(v).__name__}"
        if tuple(v.shape) != tuple(param.shape):
            return f"{k} of {what} has shape {list(v.shape)}, the policy's parameter {list(param.shape)}"
        if v.dtype != param.dtype:
            return f"{k} of {what} is {v.dtype}, the policy's parameter {param.dtype}"
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            return f"{k} of {what} is not all finite"
        if k == "exp_avg_sq" and bool((v < 0).any()):
            return f"exp_avg_sq of {what} has negative entries (a mean of squares)"
    return None


def load_checkpoint(path, any_learner: bool = False) -> dict:
    """Load a fightlab checkpoint (`safe_load`) and check the type of everything it holds; with
    ``any_learner`` (a resume) also another learner's (`TrainConfig.learner`), else fightlab's only.

    Raises:
      CheckpointError: naming the path: missing, unreadable (`safe_load`), not a fightlab
        checkpoint, or damaged / hand-edited (a field of the wrong type or out of range, an
        optimizer state whose shapes do not fit the policy's parameters).
    """
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"checkpoint {str(p)!r} does not exist or is not a file")
    ck = safe_load(p)
    need = {"format", "config", "agent", "optimizer", "curriculum", "iteration", "elapsed_s"}
    why = (f"a {type(ck).__name__}, not a dict" if not isinstance(ck, dict)
           else f"format {short_repr(ck.get('format'))}, expected 'fightlab-ckpt-1'"
           if ck.get("format") != "fightlab-ckpt-1"
           else f"missing {', '.join(sorted(need - set(ck)))}" if not need <= set(ck) else None)
    if why is not None:
        raise CheckpointError(f"checkpoint {str(p)!r} is not a fightlab checkpoint ({why})")
    _check_checkpoint(p, ck, any_learner)
    return ck


def later_checkpoints(run_dir, iteration: int) -> list[str]:
    """Names of the ``ckpt_<iteration>.pt`` files in ``run_dir`` past ``iteration``, by iteration (a
    resume of an older checkpoint in its own folder would write over them); [] when none or no
    folder."""
    d = Path(run_dir)
    if not d.is_dir():
        return []
    later = {p.name: int(m.group(1)) for p in d.glob("ckpt_*.pt") if (m := CHECKPOINT_NAME.match(p.name))}
    return sorted((n for n, it in later.items() if it > iteration), key=later.get)


def relabel_checkpoints(run, old_run_id: str, after: int) -> list[str]:
    """Write `run`'s run_id and ``forked_from`` into its folder's checkpoints of `old_run_id` past
    iteration `after` (a fork's own states, `measure.report.fork_if_diverged`), each atomically
    as `save_checkpoint` writes (its temporary listed in the run folder's manifest first).
    Returns the names rewritten."""
    done = []
    for name in later_checkpoints(run.run_dir, after):
        path = Path(run.run_dir) / name
        ck = safe_load(path)
        if ck.get("run_id") != old_run_id:
            continue
        ck["run_id"], ck["forked_from"] = run.run_id, getattr(run, "forked_from", None)
        tmp = path.with_suffix(".tmp")
        run.rundir.add(name, tmp.name)
        _write(_plain(ck), path, tmp)
        done.append(name)
    return done


def save_checkpoint(run, path=None) -> Path:
    """Write `run`'s checkpoint (a `fightlab.run.runner.Trainer`; with the reference check's
    verdict once it ran) to `path`, default ``ckpt_<iteration>.pt`` in its run folder, atomically;
    inside the run folder ``latest.pt`` then links to it and older checkpoints go
    (`prune_checkpoints`). Returns the path.

    Raises:
      OSError: one line naming the file when it cannot be written (a full disk, also under
        torch's RuntimeError), its temporary removed and the previous checkpoint intact."""
    path = Path(path) if path else run.run_dir / f"ckpt_{run.iteration:06d}.pt"
    ck = dict(format="fightlab-ckpt-1", config=to_dict(run.cfg), agent=run.agent.state_dict(),
              optimizer=_float_lr(run.optimizer.state_dict()), curriculum=run.curriculum.state_dict(),
              iteration=run.iteration, elapsed_s=run.elapsed_s, compile_s=run.compile_s,
              time_to_solve_s=run.time_to_solve_s, solve_iteration=run.solve_iteration,
              env_state=run.env.state_dict(), amp_target=run.env.amplitude_target,
              obs=run.obs.detach().cpu(), priv_obs=run.env.priv_obs.detach().cpu(),
              obs_history=run.obs_hist.state_dict() if getattr(run, "obs_hist", None) else None,
              torch_rng=torch.get_rng_state(),
              gen_state=run.gen.get_state().cpu(), run_id=run.run_id,
              forked_from=getattr(run, "forked_from", None),
              segments=run.segments, history=run.history,
              reference_eval=getattr(run, "reference_eval", None),
              cuda_rng=torch.cuda.get_rng_state(torch.device(run.policy_device))
              if run.policy_device.startswith("cuda") else None)
    tmp = path.with_suffix(".tmp")
    inside = path.resolve().parent == run.run_dir
    if inside:  # recorded first, so that a kill -9 mid-write leaves nothing unlisted
        run.rundir.claim(path.name, tmp.name, "latest.pt", "latest.pt.tmp")  # never a file not ours
    _write(_plain(ck), path, tmp)
    if not inside:
        return path  # a copy elsewhere: not part of the run folder
    link = run.run_dir / "latest.pt.tmp"
    link.unlink(missing_ok=True)
    try:
        link.symlink_to(path.name)
        link.replace(run.run_dir / "latest.pt")  # atomic: latest.pt is never missing
    except OSError:
        pass
    prune_checkpoints(run.rundir, path)
    return path


#: older checkpoints a run folder keeps beside its newest (``latest.pt``'s): `prune_checkpoints`
KEEP_CHECKPOINTS = 3


def prune_checkpoints(rundir, newest, n: int = KEEP_CHECKPOINTS) -> list[str]:
    """Delete the ``ckpt_<iteration>.pt`` files that run folder ``rundir`` (a `fightlab.rundir.RunDir`)
    lists (fightlab wrote them) older than the ``n`` newest before ``newest`` (the checkpoint just
    written), and drop them from the manifest; never ``newest``, a link or a file fightlab did not
    write. Returns the names deleted."""
    newest = Path(newest).name
    mine = sorted(((int(m.group(1)), name) for name in rundir.files() if (m := CHECKPOINT_NAME.match(name))),
                  reverse=True)
    newest_it = next((it for it, name in mine if name == newest), None)
    older = [name for it, name in mine if newest_it is None or it < newest_it]
    gone = []
    for name in older[n:]:
        p = rundir.path / name
        if name == newest or p.is_symlink() or not p.is_file():
            continue
        p.unlink()
        gone.append(name)
    if gone:
        rundir.forget(*gone)
    return gone


def _write(ck: dict, path: Path, tmp: Path) -> None:
    """``torch.save`` through a temporary (`fightlab.rundir.atomic_path`): a kill leaves the old
    file or the new one; any failure of torch.save (a full disk) is one OSError naming the
    file, the temporary removed."""
    with atomic_path(path, tmp) as t:
        try:
            torch.save(ck, t)
        except (RuntimeError, OSError) as e:  # torch's zip writer: "file write failed", "unexpected pos"
            raise (write_error(e, path) or OSError(errno.EIO, f"could not write the checkpoint "
                                                   f"({_clause(e)}): is the disk full?", str(path))) from None


def _plain(obj):
    """``obj`` in the types a weights-only load reads: numpy arrays as tensors (the env state),
    numpy scalars as Python numbers, deques as lists, dataclasses as dicts."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, collections.deque)):
        return [_plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_plain(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.array(obj, order="C", copy=True))  # 0-d stays 0-d
    if isinstance(obj, np.generic):
        return obj.item()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _plain(dataclasses.asdict(obj))
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _numpy_globals() -> list:
    """What an older checkpoint's numpy arrays and scalars unpickle through: numpy's array and
    scalar reconstruction and its dtypes (torch's advice for numpy in a weights-only load)."""
    core = getattr(np, "_core", None) or np.core
    out = [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype, bytes]
    out += [v for v in vars(np.dtypes).values() if isinstance(v, type) and issubclass(v, np.dtype)]
    return out


def safe_load(path) -> object:
    """``torch.load(path, weights_only=True)`` on the CPU: no code in the file runs; an older
    checkpoint's numpy arrays allowed (module docstring). A dict's ``env_state`` comes back as
    numpy arrays.

    Raises:
      CheckpointError: one line naming the file: not a file torch reads, unreadable or
        truncated, or holding other objects (their names, e.g. ``posix.system``), which never run.
    """
    p = Path(path)
    try:
        with warnings.catch_warnings():  # torch warns of a plain pickle's protocol: the error says it
            warnings.simplefilter("ignore")
            try:
                ck = torch.load(p, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError:  # numpy inside (an older checkpoint), or worse
                with torch.serialization.safe_globals(_numpy_globals()):
                    ck = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:
        if p.is_file() and p.open("rb").read(4) != b"PK\x03\x04":  # random bytes, a plain pickle, text
            raise CheckpointError(f"checkpoint {str(p)!r} is not a checkpoint torch can read (not the "
                                  f"zip archive torch.save writes; {type(e).__name__}); use a "
                                  "checkpoint fightlab wrote") from None
        if not isinstance(e, pickle.UnpicklingError):  # a truncated or damaged zip
            raise CheckpointError(f"checkpoint {str(p)!r} is unreadable or truncated ({_clause(e)})") from None
        try:
            bad = [g for g in torch.serialization.get_unsafe_globals_in_checkpoint(p)
                   if not g.startswith(("numpy.", "builtins.bytes"))]
        except Exception:  # torch without the listing, or a file it cannot list
            bad = []
        raise CheckpointError(
            f"checkpoint {str(p)!r} holds objects other than tensors, numbers, text, lists and "
            f"dicts ({', '.join(bad[:3]) or 'not loadable with weights_only=True'}): fightlab never "
            "runs code from a file; use a checkpoint fightlab wrote") from None
    if isinstance(ck, dict) and isinstance(ck.get("env_state"), dict):
        ck["env_state"] = {k: v.numpy() if isinstance(v, torch.Tensor) else v
                           for k, v in ck["env_state"].items()}
    return ck


def _float_lr(state: dict) -> dict:
    """An optimizer state dict with each group's learning rate as a float (the file stays
    readable by any device and by older fightlab; `adopt_optimizer_state` turns it back)."""
    for g in state["param_groups"]:
        g["lr"] = float(g["lr"])
    return state


def restore_checkpoint(run, ck: dict) -> None:
    """Put a loaded checkpoint back into `run` (a `fightlab.run.runner.Trainer` whose env is warm);
    its segments are the checkpoint's, then the run's own last. Raises CheckpointError, one line,
    when the checkpoint does not fit the run."""
    try:
        _restore(run, ck)
    except CheckpointError:
        raise
    except (RuntimeError, TypeError, ValueError, KeyError, IndexError) as e:
        raise CheckpointError(f"checkpoint {run.cfg.resume!r} could not be restored ({_clause(e)})") from None


def _restore(run, ck: dict) -> None:
    run.restore_learner(ck)
    run.curriculum.load_state_dict(ck["curriculum"])
    run.iteration = int(ck["iteration"])
    run.elapsed_s = float(ck["elapsed_s"])
    run.time_to_solve_s = ck.get("time_to_solve_s")
    run.solve_iteration = ck.get("solve_iteration")
    run.run_id = ck["run_id"]
    run.forked_from = ck.get("forked_from")  # a fork's lineage goes on with it
    run.history = list(ck.get("history") or [])
    run.segments = list(ck.get("segments") or [{"commit": "unknown"}]) + run.segments[-1:]
    try:
        run.env.load_state_dict({"amp_target": ck["amp_target"], **ck["env_state"]})
    except ValueError as e:
        raise CheckpointError(f"checkpoint's {e}") from None
    run.obs.copy_(ck["obs"].to(run.obs.device))
    if run.env.priv_dim:  # an asymmetric critic's input (older checkpoints had none to keep)
        run.env.priv_obs.copy_(ck["priv_obs"].to(run.env.priv_obs.device))
    torch.set_rng_state(ck["torch_rng"])
    seed = run.cfg.seed + 12345 + run.iteration
    try:
        run.gen.set_state(ck["gen_state"].to(run.gen.device) if run.policy_device == "cpu" else ck["gen_state"])
    except RuntimeError:
        # a checkpoint of another device type (a CPU generator's state does not fit a CUDA
        # one): the permutations continue from a seed of the run and its iteration, said here
        run.gen.manual_seed(seed)
        print(f"resume: the minibatch permutation RNG comes from another device type; it "
              f"continues from seed {seed}", flush=True)
    if ck.get("cuda_rng") is not None and run.policy_device.startswith("cuda"):
        torch.cuda.set_rng_state(ck["cuda_rng"], torch.device(run.policy_device))


#: TrainConfig fields a resumed segment may change (each is recorded in the segment's entry);
#: every other field of a resumed run is its checkpoint's. The run folder is the checkpoint's.
SEGMENT_FIELDS = ("device", "max_iterations", "segment_s", "logger")


def resume_conflicts(saved: TrainConfig, given: dict) -> list[tuple[str, object, object]]:
    """The settings in ``given`` ({TrainConfig field: value}, only what the user set) that
    differ from the checkpoint's config ``saved`` and are not :data:`SEGMENT_FIELDS`: a
    resumed run keeps them, so each is a conflict, returned as (field, given, checkpoint's)."""
    return [(k, v, getattr(saved, k)) for k, v in given.items()
            if k not in SEGMENT_FIELDS and k != "resume" and str(v) != str(getattr(saved, k))]


def resume_config(saved: TrainConfig, cfg: TrainConfig) -> TrainConfig:
    """The config of a resumed segment: the checkpoint's ``saved`` config with only
    :data:`SEGMENT_FIELDS` taken from ``cfg``, ``resume`` = cfg.resume and ``run_dir`` = the
    checkpoint's folder (a run stays in its folder, wherever that has been moved)."""
    return dataclasses.replace(saved, resume=cfg.resume,
                               run_dir=str(Path(cfg.resume).resolve().parent),
                               **{k: getattr(cfg, k) for k in SEGMENT_FIELDS})


def load_policy(agent: ActorCritic, ck: dict, body: str, env, optimizer=None) -> None:
    """Load a checkpoint's policy (and optimizer) state; a policy of another body or config is a
    CheckpointError with a one-line reason, not torch's size-mismatch listing."""
    try:
        agent.load_state_dict(ck["agent"])
        if optimizer is not None:
            optimizer.load_state_dict(ck["optimizer"])
    except (RuntimeError, KeyError, ValueError) as e:  # torch's listing: its first mismatch
        lines = [ln.strip() for ln in str(e).strip().splitlines()]
        first = next((ln for ln in lines if ln.startswith(("size mismatch", "Missing key", "Unexpected key"))),
                     lines[0] if lines else type(e).__name__).split(". ", 1)[0].rstrip(".")[:200]
        raise CheckpointError(f"checkpoint's policy does not fit body {body!r} (obs {env.obs_dim}, "
                              f"actions {env.nu}): {first}") from None


def policy_agent(ck: dict, env, device: str) -> ActorCritic:
    """The checkpoint's actor-critic for ``env`` (its sizes, the checkpoint's network) on
    ``device``, loaded and in eval mode (``agent.act_mean(obs)``: the deterministic action).
    Raises CheckpointError when the policy does not fit the env's body."""
    c = from_dict(ck["config"])
    if c.ppo.obs_history != 1:  # its input: the worlds' last H observations, which evaluation does not keep
        raise CheckpointError(f"ppo.obs_history={c.ppo.obs_history}: a policy of stacked observations is not yet evaluated")
    priv_dim = env.privileged_dim if c.ppo.critic_obs == "privileged" else 0  # the critic's shape, unused here
    agent = ActorCritic(env.obs_dim, env.nu, c.ppo.hidden, c.ppo.init_std,
                        obs_min_std=env.obs_min_std, priv_dim=priv_dim,
                        matmul_precision=c.ppo.matmul_precision).to(torch.device(device))  # as it trained
    load_policy(agent, ck, c.body, env)
    agent.eval()
    return agent
