"""The one rule for what may write the committed data/: full size, on a GPU (or the CPU
backend), a training only with room to solve (`check_publish`, `training_size_problem`).

It is applied from two places only: before any work by `refuse_publish`, which the command
line's dispatch (`cli.publish_plans`: each command's request as what it would publish) and the
run's gate (`run.launch.plan_run`: a training from anywhere) call; and at write time by
`results.files.check_committed`."""

from __future__ import annotations

from typing import Iterable

from fightlab.config import TrainConfig, validate_backend
from fightlab.errors import ConfigError


#: a training that publishes runs at least this many worlds: the smallest world count of any
#: committed training study (the sweep's solve trainings and the --nworld auto ramp start at 256;
#: every row of data/results/train.csv has at least 256, tests/test_sweep.py checks both). Fewer
#: worlds is a check of the code path, not the task's measurement.
MIN_PUBLISH_NWORLD = 256


def _publish_curriculum(cfg: "TrainConfig") -> tuple[int, int]:
    """(stages, wait) of the longer of the task's curriculum (the defaults) and ``cfg``'s."""
    task = TrainConfig()
    return max(((len(tuple(c.curriculum_stages)), int(c.curriculum_wait)) for c in (task, cfg)),
               key=lambda sw: sw[0] * sw[1])


def min_publish_iterations(cfg: "TrainConfig") -> int:
    """The fewest `max_iterations` a published training may have: the curriculum waits
    `curriculum_wait` iterations per stage (10 stages × 32 = 320), and a run stopped sooner cannot
    solve by construction. The task's own curriculum (the defaults) sets the floor too: one
    shortened with ``--set`` changes the task. A `stop_after_stage` s run: (s + 1) × wait."""
    stages, wait = _publish_curriculum(cfg)
    st = getattr(cfg, "stop_after_stage", None)
    return (min(st + 1, stages) if isinstance(st, int) and not isinstance(st, bool) else stages) * wait


def training_size_problem(cfg: "TrainConfig") -> str | None:
    """Why a training is not full size (one clause naming the value and the bound), or None.
    Full size, on either backend: nworld and `reference_nworld` >= :data:`MIN_PUBLISH_NWORLD`,
    max_iterations >= :func:`min_publish_iterations`."""
    if cfg.nworld < MIN_PUBLISH_NWORLD:
        return (f"nworld {cfg.nworld} is below {MIN_PUBLISH_NWORLD}, the smallest world count of the "
                "committed training studies")
    ref = getattr(cfg, "reference_nworld", MIN_PUBLISH_NWORLD)
    if ref < MIN_PUBLISH_NWORLD:
        return (f"reference_nworld {ref} is below {MIN_PUBLISH_NWORLD}: the reference check of a "
                "solve runs at least as many worlds as a published training")
    need = min_publish_iterations(cfg)
    if cfg.max_iterations < need:
        stages, wait = _publish_curriculum(cfg)
        if need < stages * wait:  # stop_after_stage
            return (f"max_iterations {cfg.max_iterations} is below {need} ({need // wait} curriculum stages × "
                    f"the {wait}-iteration wait): the run could not reach stop_after_stage's end")
        return (f"max_iterations {cfg.max_iterations} is below {need} ({stages} curriculum stages × the "
                f"{wait}-iteration wait): the run could not solve")
    return None


def check_publish(publish: bool, device: str, what: str, size: str | None = "full",
                  gpu: bool = True, backend: str = "gpu", policy_device: str | None = None,
                  training: "TrainConfig | None" = None, flag: str = "--publish",
                  gpu_advice: str = "the CPU baseline publishes with --backend cpu") -> None:
    """The one rule for what may write the committed data/:

    - size: only ``"full"`` (or None, for what has no size) publishes;
    - a training (``training``, its TrainConfig) only at full size (:func:`training_size_problem`);
    - ``backend="gpu"`` (MuJoCo Warp) only on a CUDA device: on warp's CPU device it is a smoke
      check, not a measurement, whatever its folder or flags;
    - ``backend="cpu"`` (MuJoCo's C engine, the CPU baseline) on its device "cpu"; its rows name
      the CPU in the `gpu` column (`fightlab.meta.cpu_label`, checked by `results.append_row`);
    - the CPU backend with a ``policy_device`` only with the policy on a CUDA device (``"cpu"`` is
      the same run plus copies, a check of that path);
    - a rendering (Figure 1) measures nothing and passes ``gpu=False``: only its size is checked.

    Args:
      publish: whether the caller wants to write data/ (a bool; nothing else checked when False).
      device: the run's device; what: what would be written (for the message); size: the run's
        size where it has one, else None; backend: the run's physics backend; policy_device: the
        CPU backend's `TrainConfig.policy_device`; training: a training's config, else None;
      flag: the option that asked to publish, as the messages name it; gpu_advice: what the
        refusal of MuJoCo Warp on a CPU device advises besides dropping the flag (the command's
        own way to publish).
    Raises:
      ConfigError: naming the device or size that may not publish, or a publish that is not a
        bool (e.g. the string "False" from papermill's -r), or an unknown backend.
    """
    if not isinstance(publish, bool):
        raise ConfigError(f"publish must be True or False, got {publish!r}")
    if not publish:
        return
    validate_backend(backend)
    if gpu and backend == "gpu" and not str(device).startswith("cuda"):
        raise ConfigError(f"{flag} writes {what} under data/, which holds GPU measurements and the "
                          f"CPU backend's; device {device!r} is not a GPU: MuJoCo Warp on warp's CPU "
                          f"device is a smoke check (drop {flag}: the row still goes under runs/; "
                          f"{gpu_advice})")
    if gpu and policy_device is not None and not str(policy_device).startswith("cuda"):
        raise ConfigError(f"{flag} writes {what} under data/; policy device {policy_device!r} is not a "
                          "GPU: the CPU backend with its policy on the CPU through the copies is a check of "
                          f"that path, the same run as without it (drop {flag}, or put the policy on cuda:N)")
    if size is not None and size != "full":
        where = "under data/, which holds full-size measurements" if gpu else \
            "into the committed figures/, which are drawn at full size"
        raise ConfigError(f"{flag} writes {what} {where}; size {size!r} is not 'full' (drop {flag}, or run "
                          "at size 'full')")
    if training is not None and (problem := training_size_problem(training)) is not None:
        raise ConfigError(f"{flag} writes {what} under data/, which holds full-size trainings; "
                          f"{problem} (drop {flag}: the row still goes under runs/)")


def refuse_publish(plans: Iterable[dict]) -> None:
    """The publish rule before any work: every plan (`check_publish`'s keywords: whether it
    publishes, the device, what it would write, size, backend, ...) passes, or the first that
    may not publish is refused in one line (ConfigError), so nothing slow starts first."""
    for plan in plans:
        check_publish(**plan)
