"""Checks of the single-launch Newton solve (:mod:`fightlab.kernels.newton`): a float64 reference
of MuJoCo Warp's Newton solve (pyramidal rows, the iterative line search), a held-out
single-tree model with floor contacts and joint limits, a two-tree model, and the errors of the
kernel and of stock MuJoCo Warp against the reference, from the same state.

Inputs: a MuJoCo model, a device (the CPU in the tests), world counts; outputs: dicts of errors
and counts. Sources: ``mujoco_warp/_src/solver.py`` (``_solve``, ``_linesearch_iterative_kernel``,
``_solve_done``), the module docstring of :mod:`fightlab.kernels.newton`.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src import solver as mjw_solver
from mujoco_warp._src import types as mjw_types

from fightlab.kernels.newton import disable_newton, newton_solve, use_newton
from fightlab.measure.factor import random_state, relative_error, set_state
from fightlab.sim import physics

__all__ = ["contact_tree_model", "two_tree_model", "reference_solve", "solve_inputs", "solve_errors",
           "rollout_errors", "OUTPUTS"]

#: what a solve writes and the checks compare
OUTPUTS = ("qacc", "efc_force", "qfrc_constraint", "efc_state", "solver_niter", "overflow")
_EPS = 8.0 * 1.1920929e-07  # solver._ALPHA_NOISE_EPS
_MINVAL = float(mjw_types.MJ_MINVAL)


def contact_tree_model(nhinge: int = 16, seed: int = 0) -> mujoco.MjModel:
    """A held-out body: a free root and a random tree of ``nhinge`` limited hinges (±0.6 rad),
    capsules that touch a floor (not each other), condim 3, pyramidal cone, sparse Jacobian
    (``mjJAC_SPARSE``: nv is under 32), Euler, built with ``mujoco.MjSpec``."""
    rng = np.random.default_rng(seed)
    spec = mujoco.MjSpec()
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.jacobian = mujoco.mjtJacobian.mjJAC_SPARSE
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], contype=0, conaffinity=1)
    root = spec.worldbody.add_body(name="root", pos=[0, 0, 0.35])
    root.add_freejoint()
    root.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.08, 0, 0], mass=2.0, contype=1, conaffinity=0)
    links = [root]
    for n in range(nhinge):
        parent = links[int(rng.integers(max(0, len(links) - 4), len(links)))]
        d = rng.normal(size=3) * [1, 1, 0.3] - [0, 0, 0.2]
        d = 0.12 * d / np.linalg.norm(d)
        body = parent.add_body(name=f"b{n}", pos=list(d) if parent is not root else [0, 0, 0])
        axis = rng.normal(size=3)
        body.add_joint(name=f"j{n}", type=mujoco.mjtJoint.mjJNT_HINGE, axis=axis / np.linalg.norm(axis),
                       range=[-0.6, 0.6], limited=True, damping=0.2, armature=0.01)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.025, 0, 0], fromto=[0, 0, 0, *d],
                      mass=float(rng.uniform(0.1, 0.5)), contype=1, conaffinity=0)
        links.append(body)
    for n in range(0, nhinge, 2):
        spec.add_actuator(target=f"j{n}", trntype=mujoco.mjtTrn.mjTRN_JOINT, gear=[5, 0, 0, 0, 0, 0],
                          ctrlrange=[-1, 1], ctrllimited=True)
    return spec.compile()


def two_tree_model() -> mujoco.MjModel:
    """Two free bodies over a floor: two kinematic trees (the single-launch solve refuses it)."""
    spec = mujoco.MjSpec()
    spec.option.jacobian = mujoco.mjtJacobian.mjJAC_SPARSE
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1])
    for k in range(2):
        body = spec.worldbody.add_body(name=f"ball{k}", pos=[k, 0, 0.1])
        body.add_freejoint()
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.1, 0, 0], mass=1.0)
    return spec.compile()


def solve_inputs(m: Any, d: Any) -> list[dict]:
    """What a solve reads, per world, as float64 numpy: M (dense, nv×nv), J (dense, nefc×nv), D,
    aref, qfrc_smooth, the start qacc (qacc_warmstart: run_qacc_smooth off), ne, nf, and the
    options (tolerance, ls_tolerance, iterations, ls_iterations).

    Raises ValueError when a world's nefc is over the Data's njmax (its rows were not written)."""
    elemid = m.M_elemid.numpy()
    Mflat, nefc = d.M.numpy(), d.nefc.numpy()
    if int(nefc.max(initial=0)) > d.njmax:
        w = int(nefc.argmax())
        raise ValueError(f"world {w} has nefc {int(nefc[w])} over njmax {d.njmax}: give the model more "
                         "constraint slots (njmax)")
    rownnz, rowadr = d.efc.J_rownnz.numpy(), d.efc.J_rowadr.numpy()
    colind, Jv = d.efc.J_colind.numpy()[:, 0], d.efc.J.numpy()[:, 0]
    lower = np.maximum.outer(np.arange(m.nv), np.arange(m.nv)), np.minimum.outer(np.arange(m.nv), np.arange(m.nv))
    out = []
    for w in range(d.nworld):
        e = elemid[lower]
        M = np.where(e >= 0, Mflat[w][np.maximum(e, 0)], 0.0).astype(np.float64)
        J = np.zeros((int(nefc[w]), m.nv))
        for r in range(int(nefc[w])):
            a, n = rowadr[w, r], rownnz[w, r]
            J[r, colind[w, a:a + n]] = Jv[w, a:a + n]
        out.append(dict(M=M, J=J, D=d.efc.D.numpy()[w, :nefc[w]].astype(np.float64),
                        aref=d.efc.aref.numpy()[w, :nefc[w]].astype(np.float64),
                        qfrc_smooth=d.qfrc_smooth.numpy()[w].astype(np.float64),
                        qacc0=d.qacc_warmstart.numpy()[w].astype(np.float64),
                        ne=int(d.ne.numpy()[w]), nf=int(d.nf.numpy()[w]),
                        tolerance=float(m.opt.tolerance.numpy()[0]), ls_tolerance=float(m.opt.ls_tolerance.numpy()[0]),
                        iterations=int(m.opt.iterations), ls_iterations=int(m.opt.ls_iterations)))
    return out


def _direction(x: dict, Jaref: np.ndarray, Ma: np.ndarray):
    """force, state, qfrc_constraint, grad, search, |search|², newton_decrement (limit rows)."""
    active = Jaref < 0.0
    force = np.where(active, -x["D"] * Jaref, 0.0)
    qfrc = x["J"].T @ force
    grad = Ma - x["qfrc_smooth"] - qfrc
    Ja = x["J"][active]
    H = x["M"] + Ja.T @ (x["D"][active, None] * Ja)
    sol = np.linalg.solve(H, grad)
    return force, np.where(active, 1, 0), qfrc, grad, -sol, sol @ sol, grad @ sol


def _rows(x: dict, Jaref, jv, alpha: float, at_zero: bool) -> np.ndarray:
    """Σ (cost - cost(0), slope, curvature) of the limit/contact rows at ``alpha``."""
    D = x["D"]
    jvD, hess = jv * D, jv * jv * D
    quad0 = 0.5 * D * Jaref * Jaref
    if at_zero:
        act = Jaref < 0.0
        return np.array([quad0[act].sum(), (jvD * Jaref)[act].sum(), hess[act].sum()])
    cost0 = np.where(Jaref < 0.0, quad0, 0.0)
    on = Jaref + alpha * jv < 0.0
    c = np.where(on, alpha * (jvD * Jaref + 0.5 * alpha * hess) + quad0 - cost0, -cost0)
    return np.array([c.sum(), np.where(on, jvD * Jaref + alpha * hess, 0.0).sum(), np.where(on, hess, 0.0).sum()])


def _pt(q: np.ndarray, a: float) -> np.ndarray:
    return np.array([a * a * q[2] + a * q[1] + q[0], 2.0 * a * q[2] + q[1], 2.0 * q[2]])


def _div(a: float, b: float) -> float:
    return a / (b if b != 0.0 else _MINVAL)


def _in_bracket(x, y) -> bool:
    return (x[1] < y[1] < 0.0) or (x[1] > y[1] > 0.0)


def _swap(x, xa, cands, cross_first: bool):
    moved = False
    for n, (c, ca) in enumerate(cands):
        if _in_bracket(x, c) or (n == 0 and cross_first and x[1] < 0.0 and c[1] > 0.0):
            x, xa, moved = c, ca, True
    return x, xa, moved


def _bracket(x: dict, qg, p0, lo_in, lo_alpha_in, gtol, gtol_accept, Jaref, jv):
    p0d = np.array([0.0, p0[1], p0[2]])
    less = lo_in[1] < p0[1]
    lo, lo_a, hi, hi_a = (lo_in, lo_alpha_in, p0d, 0.0) if less else (p0d, 0.0, lo_in, lo_alpha_in)
    alpha = improvement = 0.0
    for _ in range(x["ls_iterations"]):
        al, ah = lo_a - _div(lo[1], lo[2]), hi_a - _div(hi[1], hi[2])
        am = 0.5 * (lo_a + hi_a)
        ln, hn, mid = (_pt(qg, a) + _rows(x, Jaref, jv, a, False) for a in (al, ah, am))
        conv = [(c, a) for c, a in ((ln, al), (hn, ah), (mid, am)) if abs(c[1]) < gtol_accept and c[0] < 0.0]
        sl = sh = False
        if conv:
            best = min(conv, key=lambda ca: ca[0][0])  # the first of equal costs, as the kernel
            lo, lo_a, hi, hi_a = best[0], best[1], best[0], best[1]
        else:
            lo, lo_a, sl = _swap(lo, lo_a, [(ln, al), (mid, am), (hn, ah)], False)
            hi, hi_a, sh = _swap(hi, hi_a, [(hn, ah), (mid, am), (ln, al)], True)
        done = (bool(conv) or (not sl and not sh) or (lo[0] < 0 and -gtol < lo[1] < 0)
                or (hi[0] < 0 and 0 < hi[1] < gtol))
        if lo[0] < 0.0 or hi[0] < 0.0:
            alpha, improvement = (lo_a, -lo[0]) if lo[0] < hi[0] else (hi_a, -hi[0])
        if done:
            return alpha, improvement, True
    return alpha, improvement, False


def _linesearch(x: dict, scale, search, search_dot, Ma, mv, Jaref, jv):
    """(α, improvement, converged): ``_linesearch_iterative_kernel``, pyramidal, no equality rows."""
    gtol = max(x["tolerance"] * x["ls_tolerance"] * np.sqrt(search_dot) / scale, 1e-6)
    qg = np.array([0.0, search @ (Ma - x["qfrc_smooth"]), 0.5 * search @ mv])
    rows = _rows(x, Jaref, jv, 0.0, True)
    p0 = np.array([qg[0], qg[1], 2.0 * qg[2]]) + rows
    q1 = np.sqrt(2.0 * max(rows[0], 0.0) * max(rows[2], 0.0)) + abs(qg[1])
    gtol_accept = max(gtol, _EPS * q1)
    if abs(p0[1]) < _EPS * q1:
        return 0.0, 0.0, True
    a0 = -_div(p0[1], p0[2])
    lo_in = _pt(qg, a0) + _rows(x, Jaref, jv, a0, False)
    if abs(lo_in[1]) < gtol_accept and lo_in[0] < 0.0:
        return a0, -lo_in[0], True
    return _bracket(x, qg, p0, lo_in, a0, gtol, gtol_accept, Jaref, jv)


def reference_solve(x: dict) -> dict:
    """MuJoCo Warp's Newton solve of one world's :func:`solve_inputs` in float64 (limit and
    pyramidal contact rows only: ``ne`` = ``nf`` = 0). Returns :data:`OUTPUTS` as numpy."""
    if x["ne"] or x["nf"]:
        raise ValueError("the float64 reference takes limit and pyramidal contact rows only")
    M, J = x["M"], x["J"]
    qacc = x["qacc0"].copy()
    scale = 1.0 / max(_MINVAL, float(np.trace(M)))
    Ma, Jaref = M @ qacc, J @ qacc - x["aref"]
    force, state, qfrc, grad, search, sdot, nd = _direction(x, Jaref, Ma)
    niter, overflow = 0, 0
    for it in range(x["iterations"]):
        mv, jv = M @ search, J @ search
        alpha, improvement, converged = _linesearch(x, scale, search, sdot, Ma, mv, Jaref, jv)
        qacc, Ma, Jaref = qacc + alpha * search, Ma + alpha * mv, Jaref + alpha * jv
        overflow |= 0 if converged else int(mjw_types.OverflowType.LS_ITERATIONS)
        force, state, qfrc, grad, search, sdot, nd = _direction(x, Jaref, Ma)
        imp, tol = scale * improvement, x["tolerance"]
        done = alpha == 0.0 or 0.0 < imp < tol or scale * np.sqrt(grad @ grad) < tol or scale * 0.5 * nd < tol
        niter = it + 1
        if not done and niter == x["iterations"]:
            overflow |= int(mjw_types.OverflowType.ITERATIONS)
        if done:
            break
    return dict(qacc=qacc, efc_force=force, qfrc_constraint=qfrc, efc_state=state, solver_niter=niter,
                overflow=overflow)


def _outputs(d: Any) -> dict:
    """:data:`OUTPUTS` of ``d`` as numpy, the rows cut to each world's nefc (lists of arrays)."""
    nefc = d.nefc.numpy()
    rows = lambda a: [a.numpy()[w, :nefc[w]].copy() for w in range(d.nworld)]  # noqa: E731
    return dict(qacc=d.qacc.numpy().copy(), efc_force=rows(d.efc.force),
                qfrc_constraint=d.qfrc_constraint.numpy().copy(), efc_state=rows(d.efc.state),
                solver_niter=d.solver_niter.numpy().copy(), overflow=d.overflow.numpy().copy())


def _run(fn, m: Any, d: Any) -> dict:
    d.overflow.zero_()
    fn(m, d)
    return _outputs(d)


def _prepared(mjm: mujoco.MjModel, nworld: int, device: str, env: Any = None, slots: Any = None):
    from fightlab.config import EnvConfig

    mjm = physics.prepare_mjmodel(mjm, env or EnvConfig())
    return physics.put(mjm, nworld, slots or physics.Slots(None, None, "given"), device,
                       qacc_smooth=False, solver_loop="unrolled")


def solve_errors(mjm: mujoco.MjModel, nworld: int = 2, seed: int = 0, device: str = "cpu", nsteps: int = 3,
                 slots: Any = None, block_dim: int = 64, noise: float = 0.05, fixes: tuple | None = None,
                 stage_clock: bool = False, rtol: float | None = None, max_flips: int | None = None) -> dict:
    """One solve from the same state by stock MuJoCo Warp, by :func:`newton_solve` and by the
    float64 :func:`reference_solve`, with fightlab's training solver options
    (``prepare_mjmodel(EnvConfig())``, no qacc_smooth). The state: the keyframe (or qpos0) with
    joint noise, ``nsteps`` stock steps (contacts, a warm start), then the forward pass. Returns
    normwise relative errors ``{out}_{a}_{b}`` for a, b in (new, stock, f64), the number of rows
    whose state differs (``state_diff_new_stock``), ``niter`` / ``overflow`` equality and
    ``nefc``; ``fixes``: the kernel's build (None: its default); ``stage_clock``: the instrumented
    build, its counts per world in ``counts`` (:data:`fightlab.kernels.stage_clock.COUNTS`);
    ``rtol``, ``max_flips``: the rank-1 path's refusal bound and most flipped rows (None: the
    kernel's defaults, :mod:`fightlab.kernels.newton_rank1`)."""
    from fightlab.kernels import stage_clock as C

    m, d = _prepared(mjm, nworld, device, slots=slots)
    qpos, qvel = random_state(mjm, nworld, np.random.default_rng(seed))
    base = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    qpos = (base + noise / 0.5 * (qpos - base)).astype(np.float32)  # random_state's ±0.5 rad → ±noise
    set_state(d, qpos, (qvel * noise).astype(np.float32))
    for _ in range(nsteps):
        mjw.step(m, d)
    mjw.forward(m, d)
    ref = [reference_solve(x) for x in solve_inputs(m, d)]
    stock = _run(mjw_solver.solve, m, d)
    clk = wp.zeros((nworld, C.NCOLS), dtype=wp.int64, device=device) if stage_clock else None
    opts = (({} if fixes is None else {"fixes": tuple(fixes)}) | ({} if clk is None else {"stage_clock": clk})
            | ({} if rtol is None else {"rtol": rtol}) | ({} if max_flips is None else {"max_flips": max_flips}))
    new = _run(lambda m, d: newton_solve(m, d, block_dim=block_dim, **opts), m, d)
    f64 = {k: [r[k] for r in ref] for k in OUTPUTS}
    out = {"nefc": d.nefc.numpy().tolist()}
    for k in ("qacc", "efc_force", "qfrc_constraint"):
        cat = {n: np.concatenate([np.ravel(v) for v in o[k]])
               for n, o in (("new", new), ("stock", stock), ("f64", f64))}
        out[f"{k}_new_stock"] = relative_error(cat["new"], cat["stock"])
        out[f"{k}_new_f64"] = relative_error(cat["new"], cat["f64"])
        out[f"{k}_stock_f64"] = relative_error(cat["stock"], cat["f64"])
    out["state_diff_new_stock"] = int(sum((a != b).sum() for a, b in zip(new["efc_state"], stock["efc_state"])))
    out["niter_equal"] = bool(np.array_equal(new["solver_niter"], stock["solver_niter"]))
    out["overflow_equal"] = bool(np.array_equal(new["overflow"], stock["overflow"]))
    out["niter"] = new["solver_niter"].tolist()
    out["niter_f64"] = [r["solver_niter"] for r in ref]
    if clk is not None:
        counts = clk.numpy()[:, len(C.STAGES):len(C.STAGES) + len(C.COUNTS)]
        out["counts"] = {c: counts[:, i].tolist() for i, c in enumerate(C.COUNTS)}
    return out


def rollout_errors(mjm: mujoco.MjModel, nworld: int = 2, nsteps: int = 100, seed: int = 0, device: str = "cpu",
                   slots: Any = None, noise: float = 0.05, fixes: tuple | None = None) -> dict:
    """``nsteps`` physics steps from the same state (the keyframe with joint noise, random constant
    controls) with stock MuJoCo Warp, with the single-launch solve (:func:`use_newton`), and with
    stock from qvel perturbed by one float32 ulp (the rollout's own sensitivity to rounding).
    Returns ``qpos_new_stock`` and ``qpos_ulp_stock``: max |Δqpos| over worlds and coordinates at
    each step's end, its largest value over the rollout (m or rad), and ``nefc_max``; ``fixes``:
    the kernel's build (None: its default)."""
    runs = [_prepared(mjm, nworld, device, slots=slots) for _ in range(3)]
    rng = np.random.default_rng(seed)
    qpos, qvel = random_state(mjm, nworld, rng)
    base = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    qpos = (base + noise / 0.5 * (qpos - base)).astype(np.float32)
    qvel = (qvel * noise).astype(np.float32)
    ctrl = rng.uniform(-0.5, 0.5, (nworld, mjm.nu)).astype(np.float32)
    ulp = np.nextafter(qvel, np.float32(np.inf)).astype(np.float32)
    for (m, d), v in zip(runs, (qvel, qvel, ulp)):
        set_state(d, qpos, v, ctrl)
    if use_newton(runs[1][0], fixes=None if fixes is None else tuple(fixes)) is not None:
        raise ValueError("the single-launch solve does not take this model")
    new_stock, ulp_stock, nefc_max = [], [], 0
    try:
        for _ in range(nsteps):
            for m, d in runs:
                mjw.step(m, d)
            q = [d.qpos.numpy() for _, d in runs]
            new_stock.append(float(np.abs(q[1] - q[0]).max()))
            ulp_stock.append(float(np.abs(q[2] - q[0]).max()))
            nefc_max = max(nefc_max, int(runs[0][1].nefc.numpy().max()))
    finally:
        disable_newton(runs[1][0])
    return dict(qpos_new_stock=max(new_stock), qpos_ulp_stock=max(ulp_stock), nefc_max=nefc_max,
                curve_new_stock=new_stock, curve_ulp_stock=ulp_stock)
