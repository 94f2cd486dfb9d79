"""Checks and measurements of the single-launch tree factor (:mod:`fightlab.kernels.factor`):
a float64 reference factorization, errors against stock, generated chains and trees
(:mod:`fightlab.measure.factor_models`, re-exported here), pushed and
quiet trajectories, timing of one factorization and of a whole step, the experiment that writes
``factor`` rows, and the Amdahl table of notebook 03.

Inputs: a MuJoCo model (a fightlab body or :func:`chain_model` / :func:`random_tree_model`),
a device and world counts; outputs: dicts of errors and times, ``factor`` result rows and their
trajectory curves. Sources: MuJoCo's ``mj_factorI`` (the reference), ``mujoco_warp/_src/smooth.py``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import mujoco
import numpy as np
import pandas as pd
import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src import smooth
from mujoco_warp._src import types as mjw_types

from fightlab import results, timing
from fightlab.kernels.factor import (BLOCK_DIM, CHUNK, build_schedule, count_factor_calls,
                                     dense_max, factor_tree, resolve_variant, stock_factor,
                                     tree_factor)
from fightlab.measure.factor_models import chain_model, model_for, random_tree_model  # re-exported
from fightlab.sim import physics

__all__ = [
    "reference_factor", "relative_error", "random_state", "put", "set_state", "factor_errors",
    "step_qacc_error", "chain_model", "random_tree_model", "push_body", "push_schedule",
    "trajectory_deviation", "benchmark", "model_for", "run_experiment", "amdahl_table",
]


def reference_factor(m: Any, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's ``mj_factorI`` of the sparse blocks in float64 (numpy), same layout as the stock.

    Args:
        m: ``mujoco_warp`` Model; M: ``(nworld, nC)`` array (cast to float64).

    Returns:
        ``(L, D)``: ``(nworld, nC)`` and ``(nworld, nv)`` float64.
    """
    L = np.array(M, dtype=np.float64, copy=True)
    rowadr, rownnz = m.M_rowadr.numpy(), m.M_rownnz.numpy()
    for lev in reversed(m.qLD_updates):
        for i, k, madr_ki in lev.numpy().reshape(-1, 3):
            diag_k = rowadr[k] + rownnz[k] - 1
            tmp = L[:, madr_ki] / L[:, diag_k]
            n = rownnz[i]
            L[:, rowadr[i]:rowadr[i] + n] -= L[:, rowadr[k]:rowadr[k] + n] * tmp[:, None]
            L[:, madr_ki] = tmp
    D = 1.0 / L[:, rowadr + rownnz - 1]
    return L, D


def relative_error(x: np.ndarray, ref: np.ndarray) -> float:
    """Normwise relative error ``max|x - ref| / max|ref|`` (0 when both are 0)."""
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    diff = float(np.max(np.abs(x - ref))) if ref.size else 0.0
    return diff / scale if scale > 0 else diff


_HINGE, _SLIDE = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)
_BALL, _FREE = int(mujoco.mjtJoint.mjJNT_BALL), int(mujoco.mjtJoint.mjJNT_FREE)


def random_state(mjm: mujoco.MjModel, nworld: int, rng: np.random.Generator):
    """Random configurations: qpos0 (or the first keyframe) plus noise, random qvel.

    Returns ``(qpos [nworld, nq], qvel [nworld, nv])`` float32 (rad, m, rad/s, m/s)."""
    base = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    qpos = np.tile(base, (nworld, 1)).astype(np.float64)
    for j in range(mjm.njnt):
        adr, t = mjm.jnt_qposadr[j], int(mjm.jnt_type[j])
        if t in (_HINGE, _SLIDE):
            qpos[:, adr] += rng.uniform(-0.5, 0.5, nworld)
        elif t == _BALL:
            q = qpos[:, adr:adr + 4] + rng.normal(0, 0.3, (nworld, 4))
            qpos[:, adr:adr + 4] = q / np.linalg.norm(q, axis=1, keepdims=True)
        elif t == _FREE:
            q = qpos[:, adr + 3:adr + 7] + rng.normal(0, 0.3, (nworld, 4))
            qpos[:, adr + 3:adr + 7] = q / np.linalg.norm(q, axis=1, keepdims=True)
    qvel = rng.normal(0, 0.5, (nworld, mjm.nv))
    return qpos.astype(np.float32), qvel.astype(np.float32)


def put(mjm: mujoco.MjModel, nworld: int, device: str, nconmax: int | None = None,
        njmax: int | None = None):
    """``physics.put`` with the given slot sizes (MuJoCo Warp's defaults where None)."""
    return physics.put(mjm, nworld, physics.Slots(nconmax, njmax, "given"), device)


def set_state(d, qpos: np.ndarray, qvel: np.ndarray, ctrl: np.ndarray | None = None):
    """Write ``qpos``/``qvel`` (and ``ctrl``) ``[nworld, nq/nv/nu]`` float32 into Data ``d``."""
    d.qpos.assign(qpos)
    d.qvel.assign(qvel)
    if ctrl is not None:
        d.ctrl.assign(ctrl)


def _three_runs(mjm: mujoco.MjModel, nworld: int, device: str, states, ctrl=None, **slots):
    """The stock, tree and ulp runs of a comparison: ``(m_s, m_t, (d_s, d_t, d_u))``, the three
    Data set to the ``(qpos, qvel)`` pairs of ``states`` (and ``ctrl``); the ulp run steps with
    ``m_s``."""
    (m_s, d_s), (m_t, d_t), (_, d_u) = [put(mjm, nworld, device, **slots) for _ in range(3)]
    for dd, (qpos, qvel) in zip((d_s, d_t, d_u), states):
        set_state(dd, qpos, qvel, ctrl)
    return m_s, m_t, (d_s, d_t, d_u)


def factor_errors(mjm: mujoco.MjModel, nworld: int = 4, seed: int = 0, device: str = "cpu",
                  block_dim: int = BLOCK_DIM, variant: str = "auto") -> dict[str, float]:
    """Factor ``M`` at random configurations with the stock path and with :func:`factor_tree`.

    The model is put on ``device`` with the current ``types.M_BLOCK_DENSE_MAX`` (lower it with
    :func:`dense_max` to send small trees to the sparse path). ``M`` comes from
    ``fwd_position`` (``crb`` + tendon armature) at ``nworld`` random states.

    Returns:
        dict (floats, unitless): ``qld_rel_err`` and ``qldiaginv_rel_err`` (custom vs stock,
        :func:`relative_error`), ``qld_rel_err_stock_f64`` / ``qld_rel_err_tree_f64`` (each vs the
        float64 reference :func:`reference_factor`; the float32 rounding scale), the same for
        ``qLDiagInv``, and ``nlevel``, ``nupdate``. ``block_dim`` / ``variant``: see
        :func:`factor_tree`.

    Raises:
        ValueError: the model has no tree over ``types.M_BLOCK_DENSE_MAX`` DOF; a bad variant.
    """
    m, d = put(mjm, nworld, device)
    if not m.qLD_updates:
        raise ValueError(f"model with nv={mjm.nv} has no sparse block (trees <= "
                         f"M_BLOCK_DENSE_MAX={mjw_types.M_BLOCK_DENSE_MAX} DOF)")
    qpos, qvel = random_state(mjm, nworld, np.random.default_rng(seed))
    set_state(d, qpos, qvel)
    with wp.ScopedDevice(device):
        mjw.fwd_position(m, d, factorize=False)
        off = m.qLD_block_total
        L_s, D_s = wp.zeros((nworld, m.nC), float), wp.zeros((nworld, m.nv), float)
        L_t, D_t = wp.zeros((nworld, m.nC), float), wp.zeros((nworld, m.nv), float)
        stock_factor(m, d, d.M, L_s, D_s)
        s = build_schedule(m)
        factor_tree(m, d, d.M, L_t, D_t, schedule=s, block_dim=block_dim, variant=variant)
        # and through a qLD-shaped view at offset qLD_block_total (the real call pattern)
        qLD = wp.zeros((nworld, off + m.nC), float)
        factor_tree(m, d, d.M, qLD[:, off:], D_t, schedule=s, block_dim=block_dim, variant=variant)
    Ls, Ds, Lt, Dt = L_s.numpy(), D_s.numpy(), L_t.numpy(), D_t.numpy()
    if not np.array_equal(qLD.numpy()[:, off:], Lt):
        raise AssertionError("factor_tree writes differently into a qLD view")
    Lr, Dr = reference_factor(m, d.M.numpy())
    return {
        "qld_rel_err": relative_error(Lt, Ls),
        "qldiaginv_rel_err": relative_error(Dt, Ds),
        "qld_rel_err_stock_f64": relative_error(Ls, Lr),
        "qld_rel_err_tree_f64": relative_error(Lt, Lr),
        "qldiaginv_rel_err_stock_f64": relative_error(Ds, Dr),
        "qldiaginv_rel_err_tree_f64": relative_error(Dt, Dr),
        "nlevel": float(s.nlevel),
        "nupdate": float(s.nupdate),
    }


def step_qacc_error(mjm: mujoco.MjModel, nworld: int = 2, seed: int = 0, device: str = "cpu",
                    nconmax: int | None = None, njmax: int | None = None,
                    block_dim: int = BLOCK_DIM, variant: str = "auto") -> dict[str, float]:
    """One ``mjw.step`` from the same random state, stock vs tree factor.

    Returns:
        ``{"qacc_rel_err", "qvel_rel_err", "qacc_rel_err_ulp"}``: custom vs stock after one step
        (:func:`relative_error`), and stock vs stock from a state whose ``qvel`` was moved by one
        float32 ulp (the scale of float32 rounding through a step); plus
        ``{"tree_calls", "stock_calls"}``, the factorizations the custom step made.
        ``block_dim`` / ``variant``: the tree kernel's (:func:`factor_tree`).
    """
    qpos, qvel = random_state(mjm, nworld, np.random.default_rng(seed))
    ctrl = np.random.default_rng(seed + 1).uniform(-1, 1, (nworld, mjm.nu)).astype(np.float32)
    qvel_ulp = np.nextafter(qvel, np.float32(np.inf)).astype(np.float32)
    with wp.ScopedDevice(device):
        m_s, m_t, (d_s, d_t, d_u) = _three_runs(mjm, nworld, device, [(qpos, qvel)] * 2 + [(qpos, qvel_ulp)],
                                                ctrl, nconmax=nconmax, njmax=njmax)
        mjw.step(m_s, d_s)
        mjw.step(m_s, d_u)
        with tree_factor(m_t, block_dim=block_dim, variant=variant) as on:
            _require(on, mjm)
            calls = count_factor_calls(m_t, d_t)
    qa_s = d_s.qacc.numpy()
    return {"qacc_rel_err": relative_error(d_t.qacc.numpy(), qa_s),
            "qvel_rel_err": relative_error(d_t.qvel.numpy(), d_s.qvel.numpy()),
            "qacc_rel_err_ulp": relative_error(d_u.qacc.numpy(), qa_s),
            "tree_calls": calls["tree"], "stock_calls": calls["stock"]}


# ----------------------------------------------------------------------------------------------
# trajectory and speed (for the GPU session; tiny on the CPU)


def _hinge_qposadr(mjm: mujoco.MjModel) -> np.ndarray:
    h = [mjm.jnt_qposadr[j] for j in range(mjm.njnt)
         if int(mjm.jnt_type[j]) in (_HINGE, _SLIDE)]
    return np.asarray(h, dtype=np.int64)


def _require(on: bool, mjm: mujoco.MjModel) -> None:
    """A tree-vs-stock comparison needs the tree factor switched on (else it compares stock with
    itself and reports a perfect, meaningless agreement)."""
    if not on:
        raise ValueError(f"model with nv={mjm.nv} has no tree over M_BLOCK_DENSE_MAX="
                         f"{mjw_types.M_BLOCK_DENSE_MAX} DOF: the tree factor has nothing to replace, "
                         "so there is no tree-vs-stock comparison to make")


def push_schedule(mjm: mujoco.MjModel, nworld: int, nsteps: int, rng: np.random.Generator,
                   interval_s: tuple[float, float] = (1.0, 3.0), duration_s: float = 0.1,
                   impulse_ns: tuple[float, float] = (15.0, 30.0)) -> np.ndarray:
    """Horizontal pushes like :class:`fightlab.envs.stance.StanceEnv`'s defaults
    (``EnvConfig.push_*``): push starts uniform(1, 3) s apart (start to start, as the env
    counts), each a constant force of impulse / duration newtons (impulse uniform(15, 30) N·s,
    random horizontal direction) for 0.1 s. Returns float32 ``(nsteps, nworld, 3)``: the force
    at each physics step (applied to :func:`push_body`)."""
    dt = float(mjm.opt.timestep)
    force = np.zeros((nsteps, nworld, 3), np.float32)
    dur = max(1, int(round(duration_s / dt)))
    for w in range(nworld):
        t = rng.uniform(*interval_s)
        while True:
            n0 = int(round(t / dt))
            if n0 >= nsteps:
                break
            ang = rng.uniform(0.0, 2.0 * np.pi)
            f = rng.uniform(*impulse_ns) / duration_s
            force[n0:n0 + dur, w, :2] = f * np.cos(ang), f * np.sin(ang)
            t += rng.uniform(*interval_s)
    return force


def push_body(mjm: mujoco.MjModel) -> int:
    """The body pushed in the trajectory comparison: the one named "torso" (fightlab's bodies,
    as the env pushes it), else body 1 (the root of the first tree)."""
    torso = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, "torso")
    return torso if torso >= 0 else 1


def trajectory_deviation(mjm: mujoco.MjModel, nworld: int = 4, nsteps: int = 10, seed: int = 0,
                         device: str = "cpu", hold: int = 5, nconmax: int | None = None,
                         njmax: int | None = None, quiet: bool = False,
                         block_dim: int = BLOCK_DIM, variant: str = "auto") -> dict[str, Any]:
    """Run identical actions for ``nsteps`` physics steps: tree factor vs stock, and stock vs
    stock from a state perturbed by one float32 ulp.

    Default ("pushed") episode: the first keyframe (or ``qpos0``) with small seeded noise, same
    for all runs; controls uniform in the control range, drawn per world every ``hold`` steps;
    horizontal pushes on the root body as in the env (:func:`push_schedule`); all seeded and
    identical for every run. ``quiet=True``: the keyframe exactly, controls held at the
    keyframe's ``ctrl`` (zero without one), no pushes: a standing episode. In both, the ulp run
    moves every hinge/slide ``qpos`` up by one float32 ulp. ``block_dim`` / ``variant``: the
    tree kernel's (:func:`factor_tree`).

    Returns:
        dict: ``max_dev_tree_rad`` / ``max_dev_ulp_rad`` (max over steps, worlds and hinge joints
        of ``|q - q_stock|``, rad for hinges), ``curve`` (DataFrame-ready dict: ``step``,
        ``time_s``, ``dev_tree_rad``, ``dev_ulp_rad`` per step), ``nsteps``, ``nan`` (True if
        any run produced a NaN; the maxima are then NaN too), ``overflow_worlds`` (worlds, summed
        over the three runs, whose contact/constraint slots overflowed: d.overflow slot bits),
        ``pushes`` (pushes applied, summed over worlds; 0 when ``quiet``).
    """
    rng = np.random.default_rng(seed)
    base = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    hadr = _hinge_qposadr(mjm)
    qpos = np.tile(base, (nworld, 1)).astype(np.float32)
    nctrl = -(-nsteps // hold)
    if quiet:
        key_ctrl = mjm.key_ctrl[0] if mjm.nkey and mjm.nu else np.zeros(mjm.nu)
        ctrls = np.broadcast_to(key_ctrl.astype(np.float32), (nctrl, nworld, mjm.nu))
        push = None
    else:
        qpos[:, hadr] += rng.normal(0, 0.01, (nworld, len(hadr))).astype(np.float32)
        lo, hi = mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1]
        ctrls = rng.uniform(lo, hi, (nctrl, nworld, mjm.nu)).astype(np.float32)
        push = push_schedule(mjm, nworld, nsteps, rng)
    qvel = np.zeros((nworld, mjm.nv), np.float32)
    qpos_ulp = qpos.copy()
    qpos_ulp[:, hadr] = np.nextafter(qpos[:, hadr], np.float32(np.inf))
    xfrc = np.zeros((nworld, mjm.nbody, 6), np.float32)
    pbody = push_body(mjm)
    with wp.ScopedDevice(device):
        m_s, m_t, (d_s, d_t, d_u) = _three_runs(mjm, nworld, device, [(qpos, qvel)] * 2 + [(qpos_ulp, qvel)],
                                                nconmax=nconmax, njmax=njmax)
        dev_t, dev_u = np.zeros(nsteps), np.zeros(nsteps)
        with tree_factor(m_t, block_dim=block_dim, variant=variant) as on:
            _require(on, mjm)
            for n in range(nsteps):
                if n % hold == 0:
                    for dd in (d_s, d_t, d_u):
                        dd.ctrl.assign(ctrls[n // hold])
                if push is not None and (n == 0 or not np.array_equal(push[n], push[n - 1])):
                    xfrc[:, pbody, :3] = push[n]
                    for dd in (d_s, d_t, d_u):
                        dd.xfrc_applied.assign(xfrc)
                mjw.step(m_s, d_s)
                mjw.step(m_t, d_t)
                mjw.step(m_s, d_u)
                qs = d_s.qpos.numpy()[:, hadr]
                dev_t[n] = np.max(np.abs(d_t.qpos.numpy()[:, hadr] - qs))
                dev_u[n] = np.max(np.abs(d_u.qpos.numpy()[:, hadr] - qs))
        # slots that ran out drop contacts/rows: such a comparison is not of the same physics
        overflow = int(sum(int(np.count_nonzero(dd.overflow.numpy() & physics.SLOT_BITS)) for dd in (d_s, d_t, d_u)))
    nan = bool(np.isnan(dev_t).any() or np.isnan(dev_u).any())
    dt = float(mjm.opt.timestep)
    return {
        # np.max, not nanmax: a NaN anywhere must show in the result
        "max_dev_tree_rad": float(np.max(dev_t)),
        "max_dev_ulp_rad": float(np.max(dev_u)),
        "overflow_worlds": overflow,
        "curve": {"step": np.arange(1, nsteps + 1), "time_s": dt * np.arange(1, nsteps + 1),
                  "dev_tree_rad": dev_t, "dev_ulp_rad": dev_u},
        "nsteps": nsteps,
        "nan": nan,
        "pushes": 0 if push is None else int(np.count_nonzero(np.diff(
            (np.abs(push[:, :, 0]) + np.abs(push[:, :, 1]) > 0).astype(np.int8), axis=0, prepend=0) == 1)),
    }


def benchmark(mjm: mujoco.MjModel, nworld: int, device: str = "cpu", inner: int = 10,
              warmup: int = 3, repeats: int = 10, graph: bool | None = None, seed: int = 0,
              with_dense: bool = True, with_step: bool = True, nconmax: int | None = None,
              njmax: int | None = None, block_dim: int = BLOCK_DIM,
              variant: str = "auto") -> dict[str, float]:
    """Factorization time per call and per physics step: stock sparse, tree kernel, dense tile.

    ``M`` is filled by ``fwd_position`` at random states; each timed region runs ``inner``
    factorizations of ``d.M`` into ``d.qLD``/``d.qLDiagInv`` (replayed from a CUDA graph when
    ``graph``, default: on CUDA), timed with :func:`fightlab.timing.measure` (synchronised, median
    of ``repeats`` after ``warmup``). The dense reference is the same model put with
    ``types.M_BLOCK_DENSE_MAX`` raised to ``nv`` (tile Cholesky, ``smooth._factor_blocks``).
    Per step = per call x the factorizations one ``mjw.step`` makes (:func:`count_factor_calls`).
    The tree kernel runs as ``variant`` with ``block_dim`` threads per world (:func:`factor_tree`);
    the "global" variant is timed too, as the reference.

    Returns:
        dict of floats (and one str, ``variant``): ``nv``, ``levels``, ``factor_calls_per_step``, ``inner_calls``,
        ``stock_us_per_call``, ``tree_us_per_call`` (the chosen variant),
        ``tree_global_us_per_call`` (the "global" variant), ``dense_us_per_call`` (NaN without
        ``with_dense``), ``stock_factor_ms_per_step``, ``tree_factor_ms_per_step``,
        ``dense_factor_ms_per_step``, ``speedup_vs_stock`` (stock / tree), ``step_stock_us``,
        ``step_tree_us`` (one whole ``mjw.step`` of all worlds; NaN without ``with_step``),
        ``graph`` (1.0/0.0); and ``variant``, the variant timed (str, "auto" resolved). Times
        are for all ``nworld`` worlds together.
    """
    if graph is None:
        graph = timing.is_cuda_device(device)
    kw = dict(nconmax=nconmax, njmax=njmax)
    qpos, qvel = random_state(mjm, nworld, np.random.default_rng(seed))
    with wp.ScopedDevice(device):
        m, d = put(mjm, nworld, device, **kw)
        set_state(d, qpos, qvel)
        mjw.fwd_position(m, d, factorize=False)
        s = build_schedule(m)
        off = m.qLD_block_total
        L = d.qLD[:, off:]

        timed = lambda call, name: _per_call(call, name, device, inner, graph, warmup, repeats)  # noqa: E731
        stock_s = timed(lambda: stock_factor(m, d, d.M, L, d.qLDiagInv), "stock sparse LDL")
        chosen = resolve_variant(s, variant)
        tree_s = timed(lambda: factor_tree(m, d, d.M, L, d.qLDiagInv, schedule=s, block_dim=block_dim,
                                           variant=chosen), f"tree LDL ({chosen})")
        global_s = tree_s if chosen == "global" else timed(
            lambda: factor_tree(m, d, d.M, L, d.qLDiagInv, schedule=s, block_dim=block_dim,
                                variant="global"), "tree LDL (global)")
        dense_s = float("nan")
        if with_dense:
            with dense_max(max(mjm.nv, mjw_types.M_BLOCK_DENSE_MAX)):
                m_dn, d_dn = put(mjm, nworld, device, **kw)
            set_state(d_dn, qpos, qvel)
            mjw.fwd_position(m_dn, d_dn, factorize=False)
            dense_s = timed(lambda: smooth._factor_blocks(m_dn, d_dn, d_dn.M, d_dn.qLD,
                                                          d_dn.qLDiagInv), "dense tile Cholesky")
        calls = sum(count_factor_calls(m, d).values())
        step_s = step_t = float("nan")
        if with_step:
            # stock and tree each step from the same random state (reset before every repeat,
            # outside the timed region) and, on CUDA, as a captured graph like training does
            m2, d2 = put(mjm, nworld, device, **kw)
            step_s = _step_time(m2, d2, qpos, qvel, "step stock", device, graph, repeats)
            with tree_factor(m2, block_dim=block_dim, variant=chosen) as on:
                _require(on, mjm)
                step_t = _step_time(m2, d2, qpos, qvel, "step tree", device, graph, repeats)
    per_call = {"stock": stock_s, "tree": tree_s, "tree_global": global_s, "dense": dense_s}
    return {
        "nv": float(mjm.nv), "levels": float(s.nlevel), "factor_calls_per_step": float(calls),
        "inner_calls": float(inner), **{f"{k}_us_per_call": t * 1e6 for k, t in per_call.items()},
        **{f"{k}_factor_ms_per_step": per_call[k] * calls * 1e3 for k in ("stock", "tree", "dense")},
        "speedup_vs_stock": stock_s / tree_s if tree_s > 0 else float("nan"),
        "step_stock_us": step_s * 1e6, "step_tree_us": step_t * 1e6, "graph": float(bool(graph)),
        "variant": chosen,
    }


def _per_call(call: Callable[[], None], name: str, device: str, inner: int, graph: bool, warmup: int,
              repeats: int) -> float:
    """Seconds per ``call`` (median over ``repeats`` of ``inner`` calls, from a CUDA graph when ``graph``)."""
    def work():
        for _ in range(inner):
            call()
    fn = work
    if graph:
        work()  # compile and load outside the capture
        with wp.ScopedCapture(device=device) as cap:
            work()
        fn = lambda: wp.capture_launch(cap.graph)  # noqa: E731
    return timing.measure(fn, device=device, warmup=warmup, repeats=repeats, name=name).median_s / inner


def _step_time(m, d, qpos: np.ndarray, qvel: np.ndarray, name: str, device: str, graph: bool,
               repeats: int) -> float:
    """Seconds of one ``mjw.step`` of all worlds from ``(qpos, qvel)`` (reset before every repeat,
    outside the timed region; on CUDA a captured graph, as training steps)."""
    set_state(d, qpos, qvel)
    mjw.step(m, d)  # compile / allocate outside the timed region and the capture
    run = lambda: mjw.step(m, d)  # noqa: E731
    if graph:
        with wp.ScopedCapture(device=device) as cap:
            mjw.step(m, d)
        run = lambda: wp.capture_launch(cap.graph)  # noqa: E731
    times = []
    for _ in range(max(1, repeats // 2)):
        set_state(d, qpos, qvel)
        times.append(timing.measure(run, device=device, warmup=0, repeats=1, name=name).median_s)
    return float(np.median(times))


def run_experiment(body: str, nworld: int, root: Any, device: str = "cpu", seed: int = 0,
                   traj_steps: int = 10, traj_nworld: int = 4, inner: int = 10,
                   repeats: int = 10, with_dense: bool = True, with_step: bool = True,
                   check_nworld: int = 4, block_dim: int = BLOCK_DIM,
                   variant: str = "auto") -> dict:
    """One ``factor`` result row: errors, trajectory deviation and speed for ``body``.

    Appends the row to ``root/data/results/factor.csv`` (:mod:`fightlab.results`) and writes the
    trajectory curve to ``root/data/curves/<run_id>.csv.gz``.

    Args:
        body: fightlab body (``"muscular-fast"``), ``"chain-N"`` or ``"tree-N"``.
        nworld: worlds for the speed measurement; root: folder holding ``data/``;
        device: ``"cpu"`` or ``"cuda:N"``; seed: random seed; traj_steps / traj_nworld: length
        (physics steps; 0 skips both trajectory comparisons, leaving their columns empty and
        writing no curve) and width of the pushed and the quiet trajectory comparisons
        (:func:`trajectory_deviation`); inner / repeats: see :func:`benchmark`;
        with_dense / with_step: include the dense reference / whole-step timing;
        check_nworld: worlds for the error checks; block_dim / variant: the tree kernel's
        threads per world and variant (:func:`factor_tree`; recorded in ``params``, with
        ``variant`` resolved). The trajectories use the same kernel.

    Returns:
        the row (dict), with ``curve`` added (the trajectory curves as a DataFrame: pushed
        ``dev_tree_rad``/``dev_ulp_rad``, quiet ``dev_quiet_tree_rad``/``dev_quiet_ulp_rad``;
        None when ``traj_steps`` is 0).

    Raises:
        RuntimeError: the tree factor disagrees with stock beyond float32 rounding (nothing is
        timed or written).
    """
    mjm, kw = model_for(body)
    errs = factor_errors(mjm, nworld=check_nworld, seed=seed, device=device, block_dim=block_dim,
                         variant=variant)
    # correctness before speed: a kernel that disagrees with stock beyond float32 rounding (the
    # same rule as tests/test_factor.py) is not timed and no row is written
    for key in ("qld", "qldiaginv"):
        bound = 3.0 * errs[f"{key}_rel_err_stock_f64"] + 1e-6
        if not errs[f"{key}_rel_err"] <= bound:
            raise RuntimeError(f"tree factor disagrees with stock on {body} ({device}): {key} relative "
                               f"error {errs[key + '_rel_err']:.3e} > {bound:.3e} (3 × stock's own "
                               "float32 error + 1e-6); nothing timed or written")
    kv = dict(block_dim=block_dim, variant=variant)
    qacc = step_qacc_error(mjm, nworld=min(check_nworld, 4), seed=seed, device=device, **kv, **kw)
    nan_t = {"max_dev_tree_rad": math.nan, "max_dev_ulp_rad": math.nan, "nan": None,
             "overflow_worlds": None, "pushes": None, "curve": None}
    traj = quiet = nan_t
    if traj_steps > 0:  # 0: skip (the notebook runs the trajectories once per body)
        traj = trajectory_deviation(mjm, nworld=traj_nworld, nsteps=traj_steps, seed=seed,
                                    device=device, **kv, **kw)
        quiet = trajectory_deviation(mjm, nworld=traj_nworld, nsteps=traj_steps, seed=seed,
                                     device=device, quiet=True, **kv, **kw)
    bench = benchmark(mjm, nworld, device=device, inner=inner, repeats=repeats, seed=seed,
                      with_dense=with_dense, with_step=with_step, block_dim=block_dim,
                      variant=variant, **kw)
    params = dict(traj_steps=traj_steps, traj_nworld=traj_nworld, inner=inner, repeats=repeats,
                  check_nworld=check_nworld, chunk=CHUNK, block_dim=block_dim, variant=bench["variant"],
                  dense_max=mjw_types.M_BLOCK_DENSE_MAX, timestep_s=float(mjm.opt.timestep))
    meta = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device=device)
    metrics = {  # the factor columns are picked from these below
        **bench, **errs, **qacc,
        "traj_steps": float(traj_steps),
        "traj_dev_tree_rad": traj["max_dev_tree_rad"],
        "traj_dev_ulp_rad": traj["max_dev_ulp_rad"],
        # no trajectory run (traj_steps == 0): empty fields, not measured zeros
        "traj_nan": None if traj["nan"] is None else bool(traj["nan"] or quiet["nan"]),
        "traj_overflow_worlds": None if traj["overflow_worlds"] is None
        else int(traj["overflow_worlds"] + quiet["overflow_worlds"]),
        "traj_pushes": None if traj["pushes"] is None else int(traj["pushes"]),
        "traj_quiet_dev_tree_rad": quiet["max_dev_tree_rad"],
        "traj_quiet_dev_ulp_rad": quiet["max_dev_ulp_rad"],
    }
    if metrics["traj_nan"] or metrics["traj_overflow_worlds"]:
        print(f"factor experiment {body}: trajectory comparison had NaN={metrics['traj_nan']} and "
              f"{metrics['traj_overflow_worlds']} overflowing worlds; recorded in the row", flush=True)
    metrics = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}
    row = {**meta, **{c: metrics[c] for c in results.columns("factor")[len(meta):]}}
    curve = None
    if traj["curve"] is not None:
        curve = pd.DataFrame(traj["curve"]).assign(dev_quiet_tree_rad=quiet["curve"]["dev_tree_rad"],
                                                   dev_quiet_ulp_rad=quiet["curve"]["dev_ulp_rad"])
    with results.publish_lock(root):  # the row and its curve land together
        results.append_row("factor", row, root)
        if curve is not None:
            results.write_curve(row["run_id"], curve, root, device=device)
    return {**row, "curve": curve}


def amdahl_table(rows: "pd.DataFrame") -> "pd.DataFrame":
    """Whole-step gain of the tree factor against the Amdahl bound its factor speedup allows.

    Per row of ``data/results/factor.csv``: ``f`` = stock factor time per step / stock step time
    (the stock factor share), ``s`` = ``speedup_vs_stock``; bound = 1 / (1 − f + f / s)
    (Amdahl, 1967: only the factor share gets faster); gain = ``step_stock_us`` /
    ``step_tree_us`` (graph-captured whole steps from the same state); ``of_bound`` =
    (gain − 1) / (bound − 1), the share of the possible gain obtained (the kernel's goal: ≥ 0.8).
    Physics steps/s = nworld / step time.

    Args:
        rows: DataFrame with columns ``body``, ``nworld``, ``stock_factor_ms_per_step``,
            ``speedup_vs_stock``, ``step_stock_us``, ``step_tree_us``.

    Returns:
        DataFrame: ``body``, ``nworld``, ``factor_share``, ``factor_speedup``, ``amdahl_bound``,
        ``step_gain``, ``of_bound``, ``steps_per_s_stock``, ``steps_per_s_tree`` (NaN where a
        column is missing or a time is not positive).

    Raises:
        KeyError: a required column is missing.
    """
    need = ["body", "nworld", "stock_factor_ms_per_step", "speedup_vs_stock", "step_stock_us",
            "step_tree_us"]
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise KeyError(f"amdahl_table needs columns {missing}; got {list(rows.columns)}")
    r = rows[need].apply(pd.to_numeric, errors="coerce").assign(body=rows["body"])
    pos = lambda c: r[c].where(r[c] > 0)  # noqa: E731
    f = pos("stock_factor_ms_per_step") * 1e3 / pos("step_stock_us")
    s = pos("speedup_vs_stock")
    bound = 1.0 / (1.0 - f + f / s)
    gain = pos("step_stock_us") / pos("step_tree_us")
    return pd.DataFrame({
        "body": rows["body"], "nworld": rows["nworld"], "factor_share": f, "factor_speedup": s,
        "amdahl_bound": bound, "step_gain": gain, "of_bound": (gain - 1.0) / (bound - 1.0),
        "steps_per_s_stock": r["nworld"] / (pos("step_stock_us") * 1e-6),
        "steps_per_s_tree": r["nworld"] / (pos("step_tree_us") * 1e-6),
    })
