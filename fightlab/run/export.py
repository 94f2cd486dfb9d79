"""A checkpoint's policy as an ONNX file (``python -m fightlab export``), and that file read back
as a policy for `evaluate --policy`.

The exported graph is ``obs [batch, obs_dim] float32 -> action [batch, nu] float32``: the
observation normaliser and the actor's deterministic mean action, exactly what `evaluate`
applies (`checkpoint_policy`: fightlab's `ActorCritic.act_mean`, or a ``--learner rsl_rl`` run's
actor rebuilt as rsl_rl's ``MLPModel`` and taken through rsl_rl's own export copy ``as_onnx``;
not its runner's ``export_policy_to_onnx``: a fixed batch of 1, no metadata, written straight to
its path). Exporter: ``torch.onnx.export(..., dynamo=True)``, the torch.export-based exporter
(the default since torch 2.9; the TorchScript one is deprecated), which needs onnxscript (the
`export` extra's pins; run here on torch 2.13's CPU build; torch 2.11, the GPU machine's, has
the same default and arguments). The file's metadata_props: ``fightlab_body``, ``obs_dim``,
``nu``, ``run_id``, ``iteration``, ``solved``, ``commit`` (fightlab's), ``learner`` (and for
rsl_rl ``rsl_rl_version``, the run's) and ``config`` (the run's TrainConfig as JSON: the task a
replay runs). Nothing is written unless onnxruntime gives the actions torch gives, within
:data:`PARITY_TOL`, on at least :data:`MIN_PARITY_OBS` observations recorded by
stepping the body's env with the policy.

Nothing lost: ``policy.onnx`` is replaced only when it is a regular file fightlab's export wrote
(its metadata says so, :func:`is_fightlab_policy`); the bytes go to a temporary of a unique name
(never a user's file) renamed over it; one export per folder at a time (:data:`EXPORT_LOCK`,
`rundir.lock_file`: a second is refused). `load_exported` checks what it reads before use: the
metadata's JSON (size and nesting bounded), the config through the config rules, and the graph
opened and run once by onnxruntime (one float32 input [batch, obs_dim], one float32 output
[batch, nu]).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import torch

from fightlab.config import ConfigError, check_fields, from_dict, to_dict, validate_body, validate_env
from fightlab.run.checkpoint import load_checkpoint, policy_agent

__all__ = ["PARITY_TOL", "MIN_PARITY_OBS", "POLICY_NAME", "EXPORT_LOCK", "MAX_META_CHARS", "MAX_JSON_DEPTH",
           "export_policy", "checkpoint_policy", "ExportedPolicy", "load_exported", "is_fightlab_policy", "need_onnx"]

#: the largest |Δaction| between torch and onnxruntime an exported file may have
PARITY_TOL = 1e-5
#: the fewest recorded observations the parity check runs on
MIN_PARITY_OBS = 1000
#: the exported file's name in its folder
POLICY_NAME = "policy.onnx"
#: the lock file one export holds in its folder while it runs (removed after)
EXPORT_LOCK = ".policy.onnx.lock"
#: the longest metadata value (characters) and the deepest JSON nesting a policy file's config may have
MAX_META_CHARS = 1 << 20
MAX_JSON_DEPTH = 32
_MAX_WIDTH = 1 << 16  # the widest obs_dim / nu a policy file may declare
_MAX_OURS_BYTES = 64 << 20  # a policy.onnx larger than this is not one fightlab wrote
_RECORD_NWORLD = 8  # worlds stepped to record observations; steps: MIN_PARITY_OBS / this, rounded up


def need_onnx(*modules: str) -> list:
    """The modules imported (e.g. "onnx", "onnxruntime"). Raises ConfigError, one line, naming
    the missing ones and how to install the `export` extra."""
    import importlib

    got, missing = [], []
    for m in modules:
        try:
            got.append(importlib.import_module(m))
        except ImportError:
            missing.append(m)
    if missing:
        raise ConfigError(f"{', '.join(missing)} not installed: ONNX export and replay need the export "
                          "extra: pip install -e '.[export]'")
    return got


def _out_folder(checkpoint: Path, out) -> Path:
    """The folder the file goes into (default: the checkpoint's), absolute; ConfigError when it is
    not an existing, writable folder."""
    d = checkpoint.parent if out is None else Path(out).expanduser()
    if not d.is_dir():
        raise ConfigError(f"--out {str(d)!r} is not an existing folder")
    if not os.access(d, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {str(d)!r} is not writable")
    return d.resolve()


def is_fightlab_policy(path: Path) -> bool:
    """Whether ``path`` is a regular file (no link) that fightlab's export wrote: ONNX whose
    metadata holds export's keys (fightlab_body, obs_dim, nu, config). Reads it only."""
    import onnx
    from google.protobuf.message import DecodeError

    if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_OURS_BYTES:
        return False
    try:
        meta = {m.key for m in onnx.load_model_from_string(path.read_bytes()).metadata_props}
    except (DecodeError, ValueError, RecursionError, OSError):
        return False
    return {"fightlab_body", "obs_dim", "nu", "config"} <= meta


def _check_target(target: Path) -> None:
    """ConfigError, one line, when ``target`` exists and is not a policy fightlab's export wrote
    (a user's file, a link, a folder): export never replaces it."""
    if not (os.path.lexists(target) and not is_fightlab_policy(target)):
        return
    kind = "a link" if target.is_symlink() else "not a regular file" if not target.is_file() else \
        "not a policy fightlab's export wrote"
    raise ConfigError(f"{str(target)!r} exists and is {kind}: export replaces only its own {POLICY_NAME}; "
                      "move it away or give another --out")


@contextlib.contextmanager
def _export_lock(folder: Path):
    """Hold :data:`EXPORT_LOCK` in ``folder`` for one export (removed after), taken before any
    work: also the proof the folder takes files. ConfigError, one line: another export holds
    it, a user's file at its name, or a folder that takes no file."""
    from fightlab.rundir import lock_file

    lock = folder / EXPORT_LOCK
    if lock.is_symlink() or (os.path.lexists(lock) and not (lock.is_file() and lock.stat().st_size < 64
                                                            and re.fullmatch(rb"\s*\d*\s*", lock.read_bytes()))):
        raise ConfigError(f"{str(lock)!r} exists and is not an export's lock: move it away or give another --out")
    try:
        fd, holder = lock_file(lock)
    except OSError as e:
        raise ConfigError(f"--out {str(folder)!r} takes no file ({e.strerror}): give a writable folder") from None
    busy = f"another export (pid {holder or '?'}) is writing {str(folder / POLICY_NAME)!r}: wait for it, or give another --out"
    if fd is None:
        raise ConfigError(busy)
    try:
        try:  # the file this process locked is still the one at the name (not one an export just removed)
            ours = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            ours = False
        if not ours:
            raise ConfigError(busy)
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)  # while still held: a waiting export then finds another file
    finally:
        os.close(fd)


def _write_policy(target: Path, data: bytes) -> Path:
    """``data`` to ``target`` through a temporary of a unique name beside it (created here, so
    never a user's file), renamed over it (`rundir.atomic_write`), after `_check_target` again."""
    from fightlab.rundir import atomic_write, write_error

    _check_target(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise write_error(e, target) from None
    os.fchmod(fd, 0o644)
    os.close(fd)
    return atomic_write(target, data, tmp=tmp)


class _MeanAction(torch.nn.Module):
    """fightlab's agent's deterministic action as a module of one input (what torch.onnx.export takes)."""

    def __init__(self, agent):
        super().__init__()
        self.agent = agent

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.agent.act_mean(obs)


def checkpoint_policy(ck: dict, env, device: str) -> torch.nn.Module:
    """A checkpoint's deterministic policy for ``env`` (its obs_dim and nu) on ``device``, in eval
    mode: ``obs [n, obs_dim] -> mean action [n, nu]``, observation normalisation inside. Either
    learner's (`TrainConfig.learner`): fightlab's ``ActorCritic.act_mean`` (`policy_agent`), or
    rsl_rl's actor rebuilt with rsl_rl's classes (`fightlab.run.rsl.rsl_actor`). Raises
    CheckpointError: a policy that does not fit the env's body; ConfigError: rsl_rl missing."""
    if from_dict(ck["config"]).learner == "rsl_rl":
        from fightlab.run.rsl import rsl_actor

        return rsl_actor(ck, env.obs_dim, env.nu, device)
    return _MeanAction(policy_agent(ck, env, device)).eval()


def _record(ck: dict, device: str, progress: bool) -> tuple[torch.Tensor, object]:
    """Observations [n >= MIN_PARITY_OBS, obs_dim] float32 (CPU) that the checkpoint's policy
    meets, stepping its body's env (its task, the checkpoint's amplitude) on ``device``; and the
    env (its obs_dim, nu and normaliser floor)."""
    from fightlab.envs.task import evaluate_policy

    cfg = from_dict(ck["config"])
    seen, env_of = [], []

    def make_policy(env):
        act = checkpoint_policy(ck, env, device)
        env_of.append(env)
        return lambda obs: (seen.append(obs.detach().to("cpu", copy=True)), act(obs))[1]

    steps = -(-MIN_PARITY_OBS // _RECORD_NWORLD)
    evaluate_policy(make_policy, cfg.body, cfg.env, _RECORD_NWORLD, device, steps / cfg.env.episode_steps,
                    amplitude=float(ck.get("amp_target", 1.0)), seed=cfg.seed + 1, graph=cfg.graph,
                    tree_factor=cfg.tree_factor, progress=progress, backend=cfg.backend, threads=cfg.workers)
    return torch.cat(seen), env_of[0]


def export_policy(checkpoint, out=None, device: str | None = None, progress: bool = True) -> dict:
    """Export a fightlab checkpoint's policy to ``<out>/policy.onnx`` after the parity check.

    Args:
      checkpoint: a fightlab checkpoint of either learner (read by `load_checkpoint`: no code in
        it runs; an rsl_rl run's actor rebuilt by `checkpoint_policy`);
      out: the folder (default: the checkpoint's); device: where the env steps to record the
        observations (None: the checkpoint's run's device when it is here, else cpu).
    Returns:
      dict: path (absolute), body, obs_dim, nu, run_id, iteration, commit, learner, n_obs
      (observations checked), max_abs_diff (max |Δaction| between torch and onnxruntime, float).
    Raises:
      CheckpointError: not a fightlab checkpoint (missing, text, a crafted pickle);
      ConfigError: onnx / onnxruntime / onnxscript missing (rsl_rl for an rsl_rl run's), --out not a writable folder, a
        policy.onnx there that fightlab's export did not write (or a link), another export into
        that folder running, or parity worse than PARITY_TOL (nothing written then). All but
        the parity before the env is built.
    """
    need_onnx("onnx", "onnxruntime", "onnxscript")
    path = Path(checkpoint)
    ck = load_checkpoint(path, any_learner=True)  # either learner's: `checkpoint_policy`
    learner = _learner_meta(ck)
    folder = _out_folder(path, out)
    _check_target(folder / POLICY_NAME)
    with _export_lock(folder):
        return _export(ck, folder, device, progress, learner)


def _learner_meta(ck: dict) -> dict:
    """The learner's metadata_props: ``learner`` (`TrainConfig.learner`) and, for rsl_rl,
    ``rsl_rl_version`` (the run's latest segment's; rsl_rl imported here: ConfigError when missing)."""
    cfg = from_dict(ck["config"])
    if cfg.learner != "rsl_rl":
        return dict(learner=cfg.learner)
    from fightlab.run.rsl import require_rsl_rl

    here = require_rsl_rl()
    segs = [s for s in ck.get("segments") or () if s.get("rsl_rl_version")]
    return dict(learner=cfg.learner, rsl_rl_version=segs[-1]["rsl_rl_version"] if segs else here)


def _export(ck: dict, folder: Path, device: str | None, progress: bool, learner: dict) -> dict:
    """`export_policy`'s work, its checks done and its folder's lock held."""
    from fightlab.devices import pick_device
    from fightlab.meta import git_commit

    (ort,) = need_onnx("onnxruntime")
    cfg = from_dict(ck["config"])
    if device is None:
        device = cfg.device if cfg.backend == "gpu" and cfg.device == pick_device(None) else "cpu"
    obs, env = _record(ck, pick_device(device), progress)
    policy = checkpoint_policy(ck, env, "cpu")
    proto = _to_onnx(policy, env.obs_dim)
    meta = dict(fightlab_body=cfg.body, obs_dim=env.obs_dim, nu=env.nu, run_id=ck.get("run_id"),
                iteration=ck["iteration"], solved=bool(ck["curriculum"].get("solved")), commit=git_commit(),
                config=json.dumps(to_dict(cfg)), **learner)
    for k, v in meta.items():
        proto.metadata_props.add(key=k, value=str(v))
    data = proto.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        want = policy(obs).numpy()
    diff = float(np.abs(session.run(None, {"obs": obs.numpy()})[0] - want).max())
    if not diff <= PARITY_TOL:
        raise ConfigError(f"onnxruntime's actions differ from torch's by up to {diff:.3g} > {PARITY_TOL:g} "
                          f"on {len(obs)} observations; nothing written")
    target = _write_policy(folder / POLICY_NAME, data)
    return dict(path=str(target), body=cfg.body, obs_dim=env.obs_dim, nu=env.nu, run_id=ck.get("run_id"),
                iteration=ck["iteration"], commit=meta["commit"], learner=cfg.learner, n_obs=len(obs),
                max_abs_diff=diff)


def _to_onnx(policy: torch.nn.Module, obs_dim: int):
    """A `checkpoint_policy` module as an ONNX ModelProto (dynamic batch, input "obs", output "action")."""
    import logging
    import warnings

    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "torchvision is not installed" lines
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(policy, (torch.zeros(2, obs_dim),), dynamo=True,
                                        input_names=["obs"], output_names=["action"], verbose=False,
                                        dynamic_shapes=({0: torch.export.Dim("batch")},))
    finally:
        quiet.setLevel(level)
    return program.model_proto


class ExportedPolicy:
    """An exported policy file, checked (`load_exported`): ``config`` (its run's TrainConfig),
    ``meta`` (metadata_props, dict of str), ``path`` (absolute, resolved), ``sha256`` (hex of
    the file's bytes); ``make_policy(env)``: the ``obs [nworld, obs_dim] -> action [nworld, nu]``
    torch function `envs.task.evaluate_policy` takes, run by onnxruntime on the CPU (the action
    back on the obs' device). Refuses (ConfigError) an env of another body or observation width."""

    def __init__(self, path: Path, data: bytes, meta: dict, config, obs_dim: int, nu: int, session, input_name: str):
        self.path, self.meta, self.config, self.obs_dim, self.nu = path, meta, config, obs_dim, nu
        self.sha256 = hashlib.sha256(data).hexdigest()
        self._session, self._input = session, input_name

    def make_policy(self, env):
        if env.body != self.meta["fightlab_body"] or env.obs_dim != self.obs_dim or env.nu != self.nu:
            raise ConfigError(f"policy {str(self.path)!r} is of body {self.meta['fightlab_body']} (obs {self.obs_dim}, "
                              f"actions {self.nu}), the env is {env.body} (obs {env.obs_dim}, actions {env.nu})")
        session, name = self._session, self._input

        def policy(obs: torch.Tensor) -> torch.Tensor:
            action = session.run(None, {name: obs.detach().cpu().numpy().astype(np.float32, copy=False)})[0]
            return torch.from_numpy(action).to(obs.device)

        return policy


_HOW = "export one with python -m fightlab export CHECKPOINT"


def _one_line(e: BaseException, limit: int = 200) -> str:
    """An exception as a short single line (onnxruntime's messages run over many)."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[:limit] + "…"


def _parse_json(text: str):
    """``text`` as JSON, its size (:data:`MAX_META_CHARS`) and nesting (:data:`MAX_JSON_DEPTH`)
    checked before the parser sees it. ValueError when over either or not JSON."""
    if len(text) > MAX_META_CHARS:
        raise ValueError(f"its config metadata has {len(text)} characters, more than {MAX_META_CHARS}")
    depth = top = 0
    for c in re.sub(r'"(?:[^"\\]|\\.)*"', '""', text):  # strings out: only their brackets count
        if c in "[{":
            depth += 1
            top = max(top, depth)
        elif c in "]}":
            depth -= 1
    if top > MAX_JSON_DEPTH:
        raise ValueError(f"its config metadata nests {top} deep, more than {MAX_JSON_DEPTH}")
    return json.loads(text)


def _width(meta: dict, key: str) -> int:
    v = meta[key]
    if not re.fullmatch(r"[1-9][0-9]{0,5}", v) or int(v) > _MAX_WIDTH:
        raise ValueError(f"{key} must be a positive integer up to {_MAX_WIDTH}, got {v[:20]!r}")
    return int(v)


def _checked_meta(model) -> tuple[dict, object, int, int]:
    """(metadata, TrainConfig, obs_dim, nu) of a policy file's ModelProto: its config through the
    config rules (`check_fields` on the file's values, as a checkpoint's; the device aside).
    Raises KeyError / ValueError / TypeError / ConfigError."""
    meta = {m.key: m.value for m in model.metadata_props}
    obs_dim, nu = _width(meta, "obs_dim"), _width(meta, "nu")
    raw = _parse_json(meta["config"])
    if not isinstance(raw, dict):
        raise TypeError(f"its config must be a JSON object, got {type(raw).__name__}")
    config = from_dict(raw)
    check_fields(dataclasses.replace(config, device="cpu"))
    validate_body(meta["fightlab_body"]), validate_env(config.env)
    if config.body != meta["fightlab_body"]:
        raise ValueError(f"its config's body {config.body} is not its fightlab_body {meta['fightlab_body']}")
    return meta, config, obs_dim, nu


def _checked_session(ort, where: str, data: bytes, obs_dim: int, nu: int):
    """(onnxruntime session, input name) of a policy file, opened and run once on a zeros batch:
    one float32 input [batch, obs_dim], one float32 output [batch, nu]. ConfigError, one line."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # errors only: its warnings about a crafted graph are not our one line
    try:
        session = ort.InferenceSession(data, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own errors (unknown op, domain, opset, bad graph)
        raise ConfigError(f"policy {where} is not a policy onnxruntime can run ({_one_line(e)}); {_HOW}") from None
    ins, outs = session.get_inputs(), session.get_outputs()
    shown = "; ".join(f"{v.name} {v.type} {v.shape}" for v in (*ins, *outs))[:300]
    refused = ConfigError(f"policy {where} must take one float32 input [batch, {obs_dim}] and give one float32 "
                          f"output [batch, {nu}], has {len(ins)} input(s), {len(outs)} output(s): {shown}; {_HOW}")

    def fits(v, width: int) -> bool:
        return v.type == "tensor(float)" and len(v.shape or ()) == 2 and v.shape[1] == width

    if len(ins) != 1 or len(outs) != 1 or not fits(ins[0], obs_dim) or not fits(outs[0], nu):
        raise refused
    try:
        out = session.run(None, {ins[0].name: np.zeros((2, obs_dim), np.float32)})
    except Exception as e:
        raise ConfigError(f"policy {where} fails in onnxruntime on a batch of zeros ({_one_line(e)}); {_HOW}") from None
    a = out[0] if len(out) == 1 else None
    if not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.shape != (2, nu):
        got = f"{a.dtype} {list(a.shape)}" if isinstance(a, np.ndarray) else f"{len(out)} outputs"
        raise ConfigError(f"policy {where} gives {got} for a batch of 2 observations, not float32 [2, {nu}]; {_HOW}")
    return session, ins[0].name


def load_exported(path) -> ExportedPolicy:
    """Read and check an exported policy file before any use: ONNX; fightlab's metadata (body,
    obs_dim, nu, config: its JSON bounded in size and nesting, its fields through the config
    rules); the graph opened by onnxruntime and run once on zeros: one float32 input [batch,
    obs_dim], one float32 output [batch, nu]. Raises ConfigError, one line naming the file:
    onnx or onnxruntime missing, the file missing, not ONNX, not a fightlab policy, or one
    onnxruntime cannot run."""
    from google.protobuf.message import DecodeError

    onnx, ort = need_onnx("onnx", "onnxruntime")
    p = Path(path).expanduser()
    where = repr(str(p))
    if not p.is_file():
        raise ConfigError(f"policy {where} does not exist or is not a file")
    data = p.read_bytes()
    try:
        model = onnx.load_model_from_string(data)
        onnx.checker.check_model(model)
    except (DecodeError, ValueError, RecursionError, onnx.checker.ValidationError) as e:
        raise ConfigError(f"policy {where} is not an ONNX file ({type(e).__name__}); {_HOW}") from None
    try:
        meta, config, obs_dim, nu = _checked_meta(model)
    except (KeyError, ValueError, TypeError, IndexError, RecursionError, ConfigError) as e:
        raise ConfigError(f"policy {where} is not a fightlab policy ({type(e).__name__}: {_one_line(e)}); "
                          f"{_HOW}") from None
    session, name = _checked_session(ort, where, data, obs_dim, nu)
    return ExportedPolicy(p.resolve(), data, meta, config, obs_dim, nu, session, name)
