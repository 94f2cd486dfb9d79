"""Physics-only rates of the CPU-backend candidates (issue 18 study), one body, small batches.

Each candidate advances `nworld` worlds by one control step = `substeps` (5) physics steps of the
body's model with the training solver settings, from the stance keyframe with its stance
controls, and the rate is physics steps/s = nworld × substeps × control steps / wall seconds
(median of 3 timed repeats after a warm-up).

  PYTHONPATH=. python bench/cpu_candidates.py --body simple --nworld 32 64 128 256 --threads 2

Candidates: `loop` (one MjData per world, mj_step in a Python loop: the floor), `rollout`
(mujoco.rollout.Rollout, one call per control step from the state array: open-loop `nstep =
substeps`), `batch` (mujoco.batch.Batch.step(nstep=substeps) on its thread pool, state rows live),
`batch+sensors` (the same with one contact sensor per non-support geom, what the backend needs for
the fall check), `batch-1x5` (five step(nstep=1) calls per control step: one call per substep),
`warp-cpu` (MuJoCo Warp on warp's CPU device, the step captured as a CPU graph).
"""

from __future__ import annotations

import argparse
import statistics
import time

import mujoco
import mujoco.batch
import mujoco.rollout
import numpy as np

from fightlab import bodies
from fightlab.config import EnvConfig
from fightlab.sim import physics


def _model(body: str, sensors: bool = False) -> mujoco.MjModel:
    info = bodies.BODIES[body]
    spec = bodies.build_spec(body)
    if sensors:
        support = set(info.support_bodies)
        for i, g in enumerate(spec.geoms):
            if g.parent.name in support or g.name == info.floor_geom:
                continue
            if not g.name:
                g.name = f"_g{i}"
            spec.add_sensor(type=mujoco.mjtSensor.mjSENS_CONTACT, objtype=mujoco.mjtObj.mjOBJ_GEOM,
                            objname=g.name, intprm=[1, 0, 1])
    return physics.prepare_mjmodel(spec.compile(), EnvConfig())


def _time(fn, reset, steps: int, repeats: int = 3) -> float:
    reset()
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        reset()  # every repeat runs the same trajectory from the keyframe (not timed)
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def run(body: str, nworld: int, threads: int, substeps: int = 5, steps: int = 10) -> dict:
    m = _model(body)
    key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "stance")
    out = {}

    # loop: the floor
    datas = [mujoco.MjData(m) for _ in range(nworld)]

    def loop_reset():
        for d in datas:
            mujoco.mj_resetDataKeyframe(m, d, key)

    def loop():
        for d in datas:
            for _ in range(substeps):
                mujoco.mj_step(m, d)
    out["loop"] = _time(loop, loop_reset, steps)

    # rollout: one call per control step
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
    d0 = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d0, key)
    st = np.empty(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d0, st, spec)
    state = np.tile(st, (nworld, 1))

    def roll_reset():
        state[:] = st
    ctrl = np.tile(m.key_ctrl[key], (nworld, 1, 1))
    out_state = np.empty((nworld, substeps, state.shape[1]))
    with mujoco.rollout.Rollout(nthread=threads) as r:
        rdatas = [mujoco.MjData(m) for _ in range(max(1, threads))]

        def roll():
            r.rollout(m, rdatas, state, ctrl, nstep=substeps, state=out_state)
            state[:] = out_state[:, -1]
        out["rollout"] = _time(roll, roll_reset, steps)

    for name, sens, calls in (("batch", False, 1), ("batch+sensors", True, 1), ("batch-1x5", True, substeps)):
        mm = _model(body, sensors=sens)
        b = mujoco.batch.Batch(mm, nworld, nthread=threads)

        def breset():
            b.reset(keyframe=key)
            b.bind("ctrl")[:] = mm.key_ctrl[key]
        if sens:
            b.bind("sensordata")
        b.bind("xmat")
        n = substeps // calls

        def bstep():
            for _ in range(calls):
                b.step(nstep=n)
        out[name] = _time(bstep, breset, steps)

    # MuJoCo Warp on warp's CPU device, captured
    import warp as wp

    import mujoco_warp as mjw
    slots = physics.slots_for(body)
    wm, wd = physics.put(m, nworld, slots, "cpu")
    with wp.ScopedDevice("cpu"):
        qpos = np.tile(m.key_qpos[key], (nworld, 1)).astype(np.float32)
        ctrl0 = np.tile(m.key_ctrl[key], (nworld, 1)).astype(np.float32)

        def wreset():
            mjw.reset_data(wm, wd)
            wd.qpos.assign(qpos)
            wd.ctrl.assign(ctrl0)
        wreset()

        def wstep():
            for _ in range(substeps):
                mjw.step(wm, wd)
        wstep()
        g = physics.StepGraph(wstep, "cpu", name="probe")
        g.capture()
        out["warp-cpu"] = _time(g, wreset, steps)
    return {k: nworld * substeps * steps / t for k, t in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--body", default="simple")
    ap.add_argument("--nworld", type=int, nargs="+", default=[32, 64, 128, 256])
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    import os

    threads = a.threads or os.cpu_count()
    print(f"body {a.body}, threads {threads}, physics steps/s (5 substeps per control step)")
    for n in a.nworld:
        r = run(a.body, n, threads)
        print(f"nworld {n:5d}: " + "  ".join(f"{k} {v:9.0f}" for k, v in r.items()), flush=True)


if __name__ == "__main__":
    main()
