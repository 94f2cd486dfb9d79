"""Command line: python -m fightlab {train, evaluate, reproduce, describe, slots, profile}.

    python -m fightlab train --body simple --nworld 1024 --device cuda:0
    python -m fightlab train --resume runs/train/latest.pt --segment-s 540
    python -m fightlab evaluate runs/train/latest.pt --timestep 0.002
    python -m fightlab reproduce [--only 06] [--size smoke|full] [--publish]

Bad input (unknown body, nworld not a positive integer, a CUDA device on a machine without
one, an unreadable checkpoint) ends with one line `fightlab: error: …` naming the value and
exit code 2, never a traceback from inside warp.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path


def _default_device() -> str:
    try:
        import warp as wp

        wp.config.quiet = True
        wp.init()
        return "cuda:0" if wp.get_cuda_device_count() > 0 else "cpu"
    except Exception:
        return "cpu"


def _parser() -> argparse.ArgumentParser:
    from fightlab.config import BODY_NAMES

    p = argparse.ArgumentParser(prog="python -m fightlab", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("train", help="train PPO on the stance task")
    t.add_argument("--body", default="simple", help=f"one of: {', '.join(BODY_NAMES)}")
    t.add_argument("--nworld", default="1024", help="parallel worlds (positive integer)")
    t.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda:0 if present)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-iterations", type=int, default=1500)
    t.add_argument("--run-dir", default=None, help="default runs/train/<body>-<nworld>-s<seed>")
    t.add_argument("--resume", default=None, help="checkpoint to continue from")
    t.add_argument("--segment-s", type=float, default=None,
                   help="stop (with a checkpoint) after this many seconds; continue with --resume")
    t.add_argument("--checkpoint-every", type=int, default=50)
    t.add_argument("--no-graph", action="store_true", help="do not capture the env step as a graph")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field, e.g. --set ppo.learning_rate=3e-4 --set env.push_impulse_ns=[20,40]")
    t.add_argument("--publish", action="store_true",
                   help="append the result row to data/results/train.csv and the curve to data/curves/")
    t.add_argument("--no-progress", action="store_true")

    e = sub.add_parser("evaluate", help="re-run a saved policy and print fall rate, tracking, episode length")
    e.add_argument("checkpoint", nargs="?", default=None,
                   help="checkpoint to re-run (omit with --zero-action --body B)")
    e.add_argument("--body", default=None, help="body for --zero-action without a checkpoint")
    e.add_argument("--seed", type=int, default=1)
    e.add_argument("--publish", action="store_true", help="append the row to data/results/evaluate.csv")
    e.add_argument("--nworld", default="256")
    e.add_argument("--device", default=None)
    e.add_argument("--episodes", type=float, default=1.0, help="episodes per world")
    e.add_argument("--timestep", type=float, default=None, help="physics timestep override, s (e.g. 0.002)")
    e.add_argument("--zero-action", action="store_true", help="run the zero-action policy instead")
    e.add_argument("--amplitude", type=float, default=1.0)

    r = sub.add_parser("reproduce", help="run the notebooks with papermill into runs/")
    r.add_argument("--only", action="append", default=None, help="notebook number, e.g. 06 (repeatable)")
    r.add_argument("--size", choices=("smoke", "full"), default=None,
                   help="smoke (CPU-sized, default without a GPU) or full (default with a GPU)")
    r.add_argument("--publish", action="store_true", help="let the notebooks write data/ and figures/")
    r.add_argument("--device", default=None)

    d = sub.add_parser("describe", help="print a body's facts")
    d.add_argument("body")

    pr = sub.add_parser("profile", help="per-kernel GPU timing of physics (or env) steps, by stage")
    pr.add_argument("--body", default="muscular-fast")
    pr.add_argument("--nworld", default="1024")
    pr.add_argument("--nstep", type=int, default=20)
    pr.add_argument("--what", choices=("physics", "env"), default="physics")
    pr.add_argument("--device", default=None)
    pr.add_argument("--top", type=int, default=12, help="kernels to list")

    sl = sub.add_parser("slots", help="measure contacts / constraint rows of bodies pushed over")
    sl.add_argument("--body", action="append", default=None, help="body (repeatable; default both)")
    sl.add_argument("--nworld", default="4096")
    sl.add_argument("--seconds", type=float, default=3.0)
    sl.add_argument("--device", default=None)
    sl.add_argument("--limp", action="store_true", help="servos off while falling (bodies lie flatter)")
    sl.add_argument("--publish", action="store_true", help="append rows to data/results/slots.csv")
    return p


def _apply_overrides(cfg, items: list[str]):
    """Apply KEY=VALUE overrides (VALUE parsed as JSON, else a string) to a TrainConfig."""
    from fightlab.config import ConfigError, EnvConfig, PPOConfig

    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        try:
            val = json.loads(raw)
        except json.JSONDecodeError:
            val = raw
        if isinstance(val, list):
            val = tuple(val)
        parts = key.split(".")
        if len(parts) == 2 and parts[0] in ("env", "ppo"):
            sub = getattr(cfg, parts[0])
            names = [f.name for f in dataclasses.fields(EnvConfig if parts[0] == "env" else PPOConfig)]
            if parts[1] not in names:
                raise ConfigError(f"unknown field {key!r}; {parts[0]} fields: {', '.join(names)}")
            cfg = dataclasses.replace(cfg, **{parts[0]: dataclasses.replace(sub, **{parts[1]: val})})
        else:
            names = [f.name for f in dataclasses.fields(cfg) if f.name not in ("env", "ppo")]
            if key not in names:
                raise ConfigError(f"unknown field {key!r}; fields: {', '.join(names)}, env.*, ppo.*")
            cfg = dataclasses.replace(cfg, **{key: val})
    return cfg


def cmd_train(a) -> int:
    from fightlab.config import TrainConfig, validate_body, validate_device, validate_nworld

    body = validate_body(a.body)
    nworld = validate_nworld(a.nworld)
    device = validate_device(a.device or _default_device())
    run_dir = a.run_dir or f"runs/train/{body}-{nworld}-s{a.seed}"
    cfg = TrainConfig(body=body, nworld=nworld, device=device, seed=a.seed,
                      max_iterations=a.max_iterations, run_dir=run_dir, resume=a.resume,
                      segment_s=a.segment_s, checkpoint_every=a.checkpoint_every,
                      graph=not a.no_graph)
    cfg = _apply_overrides(cfg, a.set)
    from fightlab.rl.runner import Trainer, load_checkpoint

    if a.resume:
        load_checkpoint(a.resume)  # clear error before building anything
    trainer = Trainer(cfg, progress=not a.no_progress)
    res = trainer.train()
    from fightlab.rl.report import finish_run

    finish_run(trainer, res, publish=a.publish)
    return 0


def cmd_evaluate(a) -> int:
    from fightlab.config import ConfigError, validate_body, validate_device, validate_nworld
    from fightlab.rl.report import eval_row
    from fightlab.rl.runner import evaluate, evaluate_zero_action, load_checkpoint

    nworld = validate_nworld(a.nworld)
    device = validate_device(a.device or _default_device())
    if a.checkpoint is None:
        if not (a.zero_action and a.body):
            raise ConfigError("evaluate needs a CHECKPOINT, or --zero-action with --body")
        res = evaluate_zero_action(validate_body(a.body), nworld=nworld, device=device,
                                   episodes_per_world=a.episodes, amplitude=a.amplitude,
                                   seed=a.seed, timestep=a.timestep)
    else:
        load_checkpoint(a.checkpoint)
        res = evaluate(a.checkpoint, nworld=nworld, device=device, episodes_per_world=a.episodes,
                       timestep=a.timestep, zero_action=a.zero_action, amplitude=a.amplitude,
                       seed=a.seed)
    eval_row(res, checkpoint=a.checkpoint, device=device, seed=a.seed, publish=a.publish)
    return 0


def cmd_reproduce(a) -> int:
    from fightlab.reproduce import reproduce

    device = a.device or _default_device()
    size = a.size or ("full" if device.startswith("cuda") else "smoke")
    return reproduce(only=a.only, size=size, publish=a.publish, device=device)


def cmd_slots(a) -> int:
    from fightlab.bodies.describe import fallen_contacts
    from fightlab.config import BODY_NAMES, validate_body, validate_device, validate_nworld
    from fightlab.rl.report import slots_row

    nworld = validate_nworld(a.nworld)
    device = validate_device(a.device or _default_device())
    for body in a.body or BODY_NAMES:
        res = fallen_contacts(validate_body(body), nworld=nworld, seconds=a.seconds,
                              device=device, limp=a.limp)
        slots_row(body, res, device=device, limp=a.limp, publish=a.publish)
    return 0


def cmd_profile(a) -> int:
    import pandas as pd

    from fightlab.config import validate_body, validate_device, validate_nworld
    from fightlab.sim.profile import profile

    res = profile(validate_body(a.body), nworld=validate_nworld(a.nworld), nstep=a.nstep,
                  device=validate_device(a.device or _default_device()), what=a.what)
    print(res.summary())
    with pd.option_context("display.width", 160, "display.max_columns", 12):
        print(res.by_stage)
        print(res.by_kernel.head(a.top))
    return 0


def cmd_describe(a) -> int:
    from fightlab.bodies import build
    from fightlab.bodies.describe import describe

    print(json.dumps(describe(build(a.body)), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from fightlab.config import ConfigError
    from fightlab.rl.runner import CheckpointError

    try:
        return {"train": cmd_train, "evaluate": cmd_evaluate, "reproduce": cmd_reproduce,
                "describe": cmd_describe, "slots": cmd_slots, "profile": cmd_profile}[args.cmd](args)
    except (ConfigError, CheckpointError) as e:
        print(f"fightlab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
