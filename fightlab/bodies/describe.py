"""Static facts of a body's compiled model: sizes, tree levels, muscles, colliding geoms, mass.
(The contact budget after a fall is a measurement: :mod:`fightlab.measure.slots`.)"""

from __future__ import annotations

import mujoco
import numpy as np

def _tree_depth(m: mujoco.MjModel) -> int:
    depth = np.zeros(m.nv, dtype=int)
    for i in range(m.nv):                      # dof_parentid[i] < i, so one pass suffices
        p = m.dof_parentid[i]
        depth[i] = 1 + (depth[p] if p >= 0 else 0)
    return int(depth.max()) if m.nv else 0


def describe(model: mujoco.MjModel) -> dict:
    """Static facts of a compiled body model.

    Returns a dict of plain Python numbers:
        nv, nq, nu, ngeom: MuJoCo sizes.
        nbody_without_world: the body's own bodies (links), MuJoCo's ``nbody`` less its world
            body 0, as the bodies table of Figure 1 (notebook 01) counts them.
        ntree: number of kinematic trees (1 for our bodies: one tree from the pelvis).
        tree_depth: the longest chain of DOFs along ``dof_parentid`` (a free joint counts 6);
            the sparse LDL^T factor runs tree_depth − 1 sequential level updates (MuJoCo Warp's
            ``len(Model.qLD_updates)`` for a sparse body: 24 for muscular-fast's 25).
        n_ellipsoid_muscles: ellipsoid geoms whose name starts with ``muscle_``.
        n_colliding_geoms: geoms with contype or conaffinity set (the floor included).
        mass_kg: total mass [kg] (sum of body_mass).
    """
    m = model
    n_muscles = sum(
        1 for g in range(m.ngeom)
        if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_ELLIPSOID and m.geom(g).name.startswith("muscle_")
    )
    n_colliding = int(np.count_nonzero((m.geom_contype != 0) | (m.geom_conaffinity != 0)))
    return {
        "nv": int(m.nv), "nq": int(m.nq), "nu": int(m.nu), "nbody_without_world": int(m.nbody) - 1,
        "ngeom": int(m.ngeom), "ntree": int(m.ntree), "tree_depth": _tree_depth(m),
        "n_ellipsoid_muscles": int(n_muscles), "n_colliding_geoms": n_colliding,
        "mass_kg": round(float(m.body_mass.sum()), 6),
    }
