"""A checkpoint's policy as an ONNX file (``python -m fightlab export``), and that file read back
as a policy for `evaluate --policy`.

The exported graph is ``obs [batch, obs_dim] float32 -> action [batch, nu] float32``: the
observation normaliser and the actor's deterministic mean action, exactly what `evaluate`
applies (`ActorCritic.act_mean`). Exporter: ``torch.onnx.export(..., dynamo=True)``, the
torch.export-based exporter (the default since torch 2.9; the TorchScript one is deprecated),
which needs onnxscript (the `export` extra's pins; run here on torch 2.13's CPU build; torch
2.11, the GPU machine's, has the same default and arguments). The file's metadata_props:
``fightlab_body``, ``obs_dim``, ``nu``, ``run_id``, ``iteration``, ``solved``, ``commit``
(fightlab's) and ``config`` (the run's TrainConfig as JSON: the task a replay runs). Nothing is written unless onnxruntime gives the actions torch
gives, within :data:`PARITY_TOL`, on at least :data:`MIN_PARITY_OBS` observations recorded by
stepping the body's env with the policy.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import torch

from fightlab.config import ConfigError, from_dict, to_dict, validate_body, validate_env
from fightlab.run.checkpoint import load_checkpoint, policy_agent

__all__ = ["PARITY_TOL", "MIN_PARITY_OBS", "POLICY_NAME", "export_policy", "ExportedPolicy", "load_exported",
           "need_onnx"]

#: the largest |Δaction| between torch and onnxruntime an exported file may have
PARITY_TOL = 1e-5
#: the fewest recorded observations the parity check runs on
MIN_PARITY_OBS = 1000
#: the exported file's name in its folder
POLICY_NAME = "policy.onnx"
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
    """The folder the file goes into (default: the checkpoint's); ConfigError when it is not an
    existing, writable folder."""
    d = checkpoint.parent if out is None else Path(out).expanduser()
    if not d.is_dir():
        raise ConfigError(f"--out {str(d)!r} is not an existing folder")
    if not os.access(d, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {str(d)!r} is not writable")
    return d


class _MeanAction(torch.nn.Module):
    """The agent's deterministic action as a module of one input (what torch.onnx.export takes)."""

    def __init__(self, agent):
        super().__init__()
        self.agent = agent

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.agent.act_mean(obs)


def _record(ck: dict, device: str, progress: bool) -> tuple[torch.Tensor, object]:
    """Observations [n >= MIN_PARITY_OBS, obs_dim] float32 (CPU) that the checkpoint's policy
    meets, stepping its body's env (its task, the checkpoint's amplitude) on ``device``; and the
    env (its obs_dim, nu and normaliser floor)."""
    from fightlab.envs.task import evaluate_policy

    cfg = from_dict(ck["config"])
    seen, env_of = [], []

    def make_policy(env):
        act = policy_agent(ck, env, device).act_mean
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
      checkpoint: a fightlab checkpoint (read by `load_checkpoint`: no code in it runs);
      out: the folder (default: the checkpoint's); device: where the env steps to record the
        observations (None: the checkpoint's run's device when it is here, else cpu).
    Returns:
      dict: path, body, obs_dim, nu, run_id, iteration, commit, n_obs (observations checked),
      max_abs_diff (max |Δaction| between torch and onnxruntime, float).
    Raises:
      CheckpointError: not a fightlab checkpoint (missing, text, a crafted pickle);
      ConfigError: onnx / onnxruntime / onnxscript missing, --out not a writable folder, or
        parity worse than PARITY_TOL (nothing written then).
    """
    from fightlab.devices import pick_device
    from fightlab.meta import git_commit
    from fightlab.rundir import atomic_write

    _, ort, _ = need_onnx("onnx", "onnxruntime", "onnxscript")
    path = Path(checkpoint)
    ck = load_checkpoint(path)
    folder = _out_folder(path, out)
    cfg = from_dict(ck["config"])
    if device is None:
        device = cfg.device if cfg.backend == "gpu" and cfg.device == pick_device(None) else "cpu"
    obs, env = _record(ck, pick_device(device), progress)
    agent = policy_agent(ck, env, "cpu")
    proto = _to_onnx(agent, env.obs_dim)
    meta = dict(fightlab_body=cfg.body, obs_dim=env.obs_dim, nu=env.nu, run_id=ck.get("run_id"),
                iteration=ck["iteration"], solved=bool(ck["curriculum"].get("solved")), commit=git_commit(),
                config=json.dumps(to_dict(cfg)))
    for k, v in meta.items():
        proto.metadata_props.add(key=k, value=str(v))
    data = proto.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        want = agent.act_mean(obs).numpy()
    diff = float(np.abs(session.run(None, {"obs": obs.numpy()})[0] - want).max())
    if not diff <= PARITY_TOL:
        raise ConfigError(f"onnxruntime's actions differ from torch's by up to {diff:.3g} > {PARITY_TOL:g} "
                          f"on {len(obs)} observations; nothing written")
    target = atomic_write(folder / POLICY_NAME, data)
    return dict(path=str(target), body=cfg.body, obs_dim=env.obs_dim, nu=env.nu, run_id=ck.get("run_id"),
                iteration=ck["iteration"], commit=meta["commit"], n_obs=len(obs), max_abs_diff=diff)


def _to_onnx(agent, obs_dim: int):
    """The agent's mean action as an ONNX ModelProto (dynamic batch, input "obs", output "action")."""
    import logging
    import warnings

    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "torchvision is not installed" lines
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(_MeanAction(agent).eval(), (torch.zeros(2, obs_dim),), dynamo=True,
                                        input_names=["obs"], output_names=["action"], verbose=False,
                                        dynamic_shapes={"obs": {0: torch.export.Dim("batch")}})
    finally:
        quiet.setLevel(level)
    return program.model_proto


class ExportedPolicy:
    """An exported policy file, checked (`load_exported`): ``config`` (its run's TrainConfig),
    ``meta`` (metadata_props, dict of str), ``path``, ``sha256`` (hex of the file's bytes);
    ``make_policy(env)``: the ``obs [nworld, obs_dim] -> action [nworld, nu]`` torch function
    `envs.task.evaluate_policy` takes, run by onnxruntime on the CPU (the action back on the obs'
    device). Refuses (ConfigError) an env of another body or observation width."""

    def __init__(self, path: Path, data: bytes, meta: dict, config, obs_dim: int, nu: int):
        self.path, self.meta, self.config, self.obs_dim, self.nu = path, meta, config, obs_dim, nu
        self.sha256 = hashlib.sha256(data).hexdigest()
        self._data = data

    def make_policy(self, env):
        (ort,) = need_onnx("onnxruntime")
        if env.body != self.meta["fightlab_body"] or env.obs_dim != self.obs_dim or env.nu != self.nu:
            raise ConfigError(f"policy {str(self.path)!r} is of body {self.meta['fightlab_body']} (obs {self.obs_dim}, "
                              f"actions {self.nu}), the env is {env.body} (obs {env.obs_dim}, actions {env.nu})")
        session = ort.InferenceSession(self._data, providers=["CPUExecutionProvider"])

        def policy(obs: torch.Tensor) -> torch.Tensor:
            action = session.run(None, {"obs": obs.detach().cpu().numpy().astype(np.float32, copy=False)})[0]
            return torch.from_numpy(action).to(obs.device)

        return policy


def load_exported(path) -> ExportedPolicy:
    """Read and check an exported policy file: ONNX, one float input "obs" [batch, obs_dim] and
    one output [batch, nu], fightlab's metadata (body, obs_dim, nu, config) agreeing with it.
    Raises ConfigError, one line naming the file: missing, not ONNX, or not a fightlab policy."""
    from google.protobuf.message import DecodeError

    (onnx,) = need_onnx("onnx")
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"policy {str(p)!r} does not exist or is not a file")
    data = p.read_bytes()
    try:
        model = onnx.load_model_from_string(data)
        onnx.checker.check_model(model)
    except (DecodeError, ValueError, onnx.checker.ValidationError) as e:
        raise ConfigError(f"policy {str(p)!r} is not an ONNX file ({type(e).__name__}); export one with "
                          "python -m fightlab export CHECKPOINT") from None
    meta = {m.key: m.value for m in model.metadata_props}
    try:
        dims = [[d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]
                for v in (*model.graph.input, *model.graph.output)]
        obs_dim, nu = int(meta["obs_dim"]), int(meta["nu"])
        config = from_dict(json.loads(meta["config"]))
        validate_body(meta["fightlab_body"]), validate_env(config.env)
        if config.body != meta["fightlab_body"] or len(dims) != 2 or [d[1:] for d in dims] != [[obs_dim], [nu]]:
            raise ValueError("its graph and metadata disagree")
    except (KeyError, ValueError, TypeError, IndexError, ConfigError) as e:
        raise ConfigError(f"policy {str(p)!r} is not a fightlab policy ({type(e).__name__}: {e}); export one "
                          "with python -m fightlab export CHECKPOINT") from None
    return ExportedPolicy(p, data, meta, config, obs_dim, nu)
