"""The models the tree-factor checks of :mod:`fightlab.measure.factor` run on (re-exported there):
generated hinge chains and random trees built with ``mujoco.MjSpec`` (no contacts, Euler
integrator), and :func:`model_for`, a fightlab body or a generated model by name."""

from __future__ import annotations

import mujoco
import numpy as np

from fightlab import bodies
from fightlab.sim import physics

__all__ = ["chain_model", "random_tree_model", "model_for"]


def _add_link(parent, name: str, length: float, rng: np.random.Generator, joint: str = "hinge"):
    body = parent.add_body(name=name, pos=[0, 0, -length])
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    if joint == "ball":
        body.add_joint(name=f"{name}_j", type=mujoco.mjtJoint.mjJNT_BALL, damping=0.5)
    else:
        body.add_joint(name=f"{name}_j", type=mujoco.mjtJoint.mjJNT_HINGE, axis=axis, damping=0.5,
                       armature=0.05)
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.03, 0, 0],
                  fromto=[0, 0, 0, 0, 0, -length], mass=float(rng.uniform(0.2, 1.0)),
                  contype=0, conaffinity=0)
    return body


def _tree_spec(parents: list[int], joints: list[str], seed: int, free: bool,
               extra_chains: tuple[int, ...] = ()) -> mujoco.MjSpec:
    rng = np.random.default_rng(seed)
    spec = mujoco.MjSpec()
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    root = spec.worldbody.add_body(name="root", pos=[0, 0, 2])
    if free:
        root.add_freejoint()
    root.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.1, 0, 0], mass=2.0,
                  contype=0, conaffinity=0)
    bodies = [root]
    for n, (p, jt) in enumerate(zip(parents, joints)):
        bodies.append(_add_link(bodies[p], f"b{n}", float(rng.uniform(0.05, 0.2)), rng, jt))
    for c, length in enumerate(extra_chains):  # separate small trees (dense / scalar paths)
        body = spec.worldbody.add_body(name=f"extra{c}", pos=[1.0 + c, 0, 2])
        for n in range(length):
            body = _add_link(body, f"x{c}_{n}", 0.1, rng)
    for n in range(0, len(joints), 3):  # a few motors so steps have control input
        if joints[n] == "hinge":
            spec.add_actuator(target=f"b{n}_j", trntype=mujoco.mjtTrn.mjTRN_JOINT,
                              gear=[1, 0, 0, 0, 0, 0], ctrlrange=[-1, 1], ctrllimited=True)
    return spec


def chain_model(ndof: int, seed: int = 0, free: bool = False,
                extra_chains: tuple[int, ...] = ()) -> mujoco.MjModel:
    """A hinge chain of ``ndof`` DOF (plus 6 with ``free``), random axes and masses, damping 0.5,
    armature 0.05, no contacts, Euler integrator, built with ``mujoco.MjSpec``; ``extra_chains``
    adds separate hinge chains of those lengths (further trees: small ones take the scalar or
    dense block paths)."""
    if ndof < 1:
        raise ValueError(f"ndof must be >= 1, got {ndof!r}")
    return _tree_spec(list(range(ndof)), ["hinge"] * ndof, seed, free, extra_chains).compile()


def random_tree_model(ndof: int, nbranch: int = 4, seed: int = 0, free: bool = True,
                      ball_fraction: float = 0.1) -> mujoco.MjModel:
    """A random tree of about ``ndof`` DOF: ``nbranch`` branches of different depths grown from a
    short trunk, some branches forking again; hinges plus a fraction of ball joints (3 DOF), a
    free root by default. Built with ``mujoco.MjSpec``; no contacts; Euler integrator.

    Raises:
        ValueError: ``ndof < nbranch`` or ``nbranch < 1``.
    """
    if nbranch < 1 or ndof < nbranch:
        raise ValueError(f"need ndof >= nbranch >= 1, got ndof={ndof!r}, nbranch={nbranch!r}")
    rng = np.random.default_rng(seed)
    trunk = 2  # a chain of hinges from the root (body index: 0 is root, body n+1 is link n)
    parents, joints = list(range(trunk)), ["hinge"] * trunk
    dof = (6 if free else 0) + trunk
    tips = []
    weights = rng.dirichlet(np.ones(nbranch) * 0.7)  # uneven branch lengths
    budget = max(ndof - dof, nbranch)
    for b in range(nbranch):
        length = max(1, int(round(weights[b] * budget)))
        parent = int(rng.integers(0, trunk + 1)) if not tips or rng.random() < 0.6 \
            else int(rng.choice(tips))
        for _ in range(length):
            jt = "ball" if rng.random() < ball_fraction else "hinge"
            parents.append(parent)
            joints.append(jt)
            parent = len(parents)
            dof += 3 if jt == "ball" else 1
        tips.append(parent - max(1, length // 2))  # a later branch may fork mid-branch
    return _tree_spec(parents, joints, seed, free).compile()


def model_for(body: str) -> tuple[mujoco.MjModel, dict]:
    """``body``: a fightlab body name, ``chain-N`` or ``tree-N`` (random tree, 4 branches)."""
    if body.startswith("chain-"):
        return chain_model(int(body.split("-", 1)[1])), {}
    if body.startswith("tree-"):
        return random_tree_model(int(body.split("-", 1)[1])), {}
    mjm = bodies.build(body)
    slots = physics.slots_for(body)
    return mjm, {"nconmax": slots.nconmax, "njmax": slots.njmax}
