"""Env steps/s of StanceEnv on both backends, this machine (issue 18 study): the whole env step
(actions → ctrl, pushes, 5 substeps, checks, reward, resets, observations), zero actions, next to
the C engine's `Batch.step` alone on the same model and world count (the ceiling of the CPU
backend), median of `--repeats` timed runs.

  PYTHONPATH=. python bench/cpu_env_rate.py --body simple --nworld 256 --steps 20
  PYTHONPATH=. python bench/cpu_env_rate.py --body simple --nworld 256 --backends cpu --profile

`--profile` adds a cProfile of the CPU backend's steps (the top functions by cumulative time):
where the time goes between the C engine, the env's warp kernels and the copies.
"""
import argparse
import cProfile
import pstats
import statistics
import time

import torch

from fightlab import bodies
from fightlab.envs.stance import StanceEnv
from fightlab.sim import cpu

ap = argparse.ArgumentParser()
ap.add_argument("--body", default="simple")
ap.add_argument("--nworld", type=int, default=256)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--backends", nargs="+", default=["cpu", "gpu"], choices=["cpu", "gpu", "batch"])
ap.add_argument("--profile", action="store_true")
a = ap.parse_args()


def median_s(fn):
    fn()  # warm-up
    ts = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


names = {"cpu": "CPU backend (C engine), whole env step", "gpu": "MuJoCo Warp on warp's CPU",
         "batch": "Batch.step alone (physics only)"}
for backend in a.backends + (["batch"] if "cpu" in a.backends and "batch" not in a.backends else []):
    env = StanceEnv(a.body, a.nworld, "cpu", backend="gpu" if backend == "batch" else backend)
    env.reset()
    substeps = env.substeps
    if backend == "batch":
        phys = cpu.CpuPhysics(bodies.build_spec(a.body), env.mjm, a.nworld, env.geom_support == 0,
                              cpu.cpu_count())

        def run():
            for _ in range(a.steps * substeps):
                phys.batch.step()
    else:
        act = torch.zeros(a.nworld, env.nu)

        def run():
            for _ in range(a.steps):
                env.step(act)
    dt = median_s(run)
    print(f"{a.body} nworld {a.nworld}: {names[backend]}: {a.nworld * a.steps / dt:.0f} env steps/s "
          f"({a.nworld * a.steps * substeps / dt:.0f} physics steps/s)", flush=True)
    if a.profile and backend == "cpu":
        pr = cProfile.Profile()
        pr.runcall(run)
        pstats.Stats(pr).sort_stats("cumulative").print_stats(14)
