"""Run tracking through the field's tools: every training's rows as TensorBoard scalars (torch's
`torch.utils.tensorboard.SummaryWriter`, the ``tensorboard`` package's event files) in its run
folder (its ``events.out.tfevents.*`` files, beside rows.csv), or Weights & Biases (``wandb``,
the ``wandb`` extra; offline unless ``WANDB_MODE`` says otherwise: the run's records in the
run folder's ``wandb/`` (``wandb sync`` sends them later), wandb's error reports off unless
``WANDB_ERROR_REPORTING`` says otherwise, nothing sent; wandb-core's own debug log goes to
``~/.cache/wandb/logs``).
``rows.csv`` stays the record figures are drawn from; these are for watching and comparing runs:
``tensorboard --logdir runs/train``.

Each numeric column of a row is one scalar at step = the iteration, grouped: "task/" (the task's
statistics and reward terms), "learner/" (losses, entropy, KL, learning rate, reward), "time/"
(seconds, steps per second, host reads); a solve's reference check under "reference/".
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

from fightlab.config import LOGGERS
from fightlab.errors import ConfigError

#: row columns shown under "time/" (the rest are the task's or the learner's)
_TIME = ("wall_s", "elapsed_s", "env_steps", "env_steps_per_s", "physics_steps_per_s", "rollout_s", "update_s",
         "host_reads", "graph_fallbacks")
#: the learner's columns (fightlab's STATS and rsl_rl's ``rsl_*``)
_LEARNER = ("reward", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "learning_rate",
            "action_std")


#: what each logger that needs a package says when it is missing
_MISSING = {"tensorboard": "--logger tensorboard needs the tensorboard package: pip install tensorboard "
                           "(or --logger none)",
            "wandb": "--logger wandb needs wandb: pip install -e '.[wandb]' (it runs offline unless "
                     "WANDB_MODE=online; or --logger tensorboard)"}


def check_logger(kind: str) -> None:
    """ConfigError, one line, when ``kind``'s package is missing ("tensorboard": tensorboard,
    "wandb": wandb; "auto" and "none" need none); a kind not in :data:`LOGGERS` too."""
    if kind not in LOGGERS:
        raise ConfigError(f"--logger {kind!r}: choose one of {', '.join(LOGGERS)}")
    if kind in _MISSING and importlib.util.find_spec(kind) is None:
        raise ConfigError(_MISSING[kind])


def _group(name: str) -> str:
    if name in _TIME:
        return "time"
    return "learner" if name in _LEARNER or name.startswith("rsl_") else "task"


def _number(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _wandb_run(run_dir: Path, run_id: str, config: dict, claim):
    """A W&B run named ``run_id`` in project "fightlab", its files in ``run_dir/wandb`` (claimed);
    mode ``WANDB_MODE`` (default "offline": nothing sent, and then wandb's error reports off
    unless ``WANDB_ERROR_REPORTING`` is set; wandb reads that when imported)."""
    mode = os.environ.get("WANDB_MODE", "offline")
    if mode in ("offline", "disabled"):
        os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    try:
        import wandb
    except ImportError:
        raise ConfigError(_MISSING["wandb"]) from None
    if claim is not None:
        claim("wandb")  # the folder wandb writes into: its offline run, logs and latest-run link
    return wandb.init(project="fightlab", id=run_id, dir=str(run_dir), config=config, resume="allow", mode=mode)


class RunLog:
    """One run's tracker: ``kind`` one of :data:`LOGGERS` ("none": nothing written).

    Args:
      kind: "tensorboard" (event files in ``run_dir``, recorded in the run folder's
        manifest through ``claim``), "auto" (that, or nothing with a one-line note where the
        tensorboard package is missing), "wandb" (a run named ``run_id`` in project "fightlab"),
        "none".
      run_dir: the run folder (Path); run_id: the run's id; config: the run's config as a dict.
      claim: ``(*relative paths)`` recording what the writer will write (`fightlab.rundir.RunDir.add`).
    Raises:
      ConfigError: an unknown kind, or its package not installed (one line: how to install it).
    """

    def __init__(self, kind: str, run_dir: Path, run_id: str, config: dict, claim=None):
        check_logger(kind)
        self.kind, self._tb, self._wandb = kind, None, None
        if kind in ("auto", "tensorboard"):
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                if kind == "auto":
                    print("fightlab: note: no TensorBoard events (the tensorboard package is not installed: "
                          "pip install tensorboard); rows.csv is the record", flush=True)
                    return
                raise ConfigError(_MISSING["tensorboard"]) from None
            self._tb = SummaryWriter(log_dir=str(run_dir), flush_secs=30)
            if claim is not None:
                claim(os.path.relpath(self._tb.file_writer.event_writer._file_name, run_dir))
        elif kind == "wandb":
            self._wandb = _wandb_run(run_dir, run_id, config, claim)

    def row(self, row: dict) -> None:
        """Every numeric column of an iteration's row, at step = its iteration."""
        self._write({f"{_group(k)}/{k}": v for k, v in row.items() if k != "iteration"}, int(row["iteration"]))

    def reference(self, ref: dict, step: int) -> None:
        """A solve's reference check (`fightlab.envs.task.reference_check`'s dict): passed, and per
        run ("dt", "dt/2") its fall rate and tracking."""
        values = {"reference/passed": float(bool(ref.get("passed"))), "reference/seconds": ref.get("seconds")}
        for label in ("dt", "dt/2"):
            for k in ("fall_rate", "tracking"):
                values[f"reference/{label.replace('/', '_')}_{k}"] = (ref.get(label) or {}).get(k)
        self._write(values, step)

    def _write(self, values: dict, step: int) -> None:
        """The finite numbers of ``values`` (tag → value) at ``step``, to each writer open."""
        values = {k: x for k, v in values.items() if (x := _number(v)) is not None}
        if self._tb is not None:
            for k, x in values.items():
                self._tb.add_scalar(k, x, step)
        if self._wandb is not None:
            self._wandb.log(values, step=step)

    def close(self) -> None:
        """Flush and close the writer (idempotent)."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None
