"""Env steps/s of StanceEnv on both backends, this machine (issue 18 study): the whole env step
(actions → ctrl, pushes, 5 substeps, checks, reward, resets, observations), zero actions.

  PYTHONPATH=. python bench/cpu_env_rate.py --body simple --nworld 256 --steps 20
"""
import argparse
import time

import torch

from fightlab.envs.stance import StanceEnv

ap = argparse.ArgumentParser()
ap.add_argument("--body", default="simple")
ap.add_argument("--nworld", type=int, default=256)
ap.add_argument("--steps", type=int, default=20)
a = ap.parse_args()
for backend in ("cpu", "gpu"):
    env = StanceEnv(a.body, a.nworld, "cpu", backend=backend)
    env.reset()
    act = torch.zeros(a.nworld, env.nu)
    env.step(act)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        env.step(act)
    dt = time.perf_counter() - t0
    name = "CPU backend (C engine)" if backend == "cpu" else "MuJoCo Warp on warp's CPU"
    print(f"{a.body} nworld {a.nworld}: {name}: {a.nworld * a.steps / dt:.0f} env steps/s "
          f"({a.nworld * a.steps * env.substeps / dt:.0f} physics steps/s)", flush=True)
