"""Figure 1: both bodies in the stance, drawn by MuJoCo's own offscreen renderer on the CPU.

    from fightlab.figures import bodies as render
    img = render.render_stance("muscular-fast", width=480, height=640)   # uint8 [H, W, 3]
    fig = render.figure1(width=480, height=640)                          # both bodies side by side
    table = render.bodies_table()          # sizes, tree depth, fallen contacts/rows, slot sizes

Rendering needs no GPU: ``mujoco.Renderer`` runs on OSMesa (software OpenGL, Debian package
``libosmesa6``, installed by ``scripts/setup.sh``) with ``MUJOCO_GL=osmesa`` and
``PYOPENGL_PLATFORM=osmesa``. This module sets both when the user has not set ``MUJOCO_GL``
(an explicit ``MUJOCO_GL=egl`` or ``glfw`` is respected). ``import mujoco`` picks its GL backend
once, at import time, from ``MUJOCO_GL``; fightlab imports mujoco before this module, so
``select_gl`` re-runs that choice (reloads ``mujoco.rendering.classic.gl_context``) after setting
the variables.
"""

from __future__ import annotations

import ctypes.util
import importlib
import os
from pathlib import Path

import numpy as np

from fightlab.paths import REPO_ROOT

#: the bodies of Figure 1, left to right
FIGURE1_BODIES = ("muscular-fast", "simple")


def gl_backend() -> str:
    """The GL backend the renderer will use: ``MUJOCO_GL`` if the user set it, else ``osmesa``."""
    return (os.environ.get("MUJOCO_GL") or "osmesa").lower().strip()


def gl_available() -> tuple[bool, str]:
    """(ok, reason): whether the offscreen GL library for :func:`gl_backend` can be found
    (``libOSMesa`` and PyOpenGL for ``osmesa``, ``libEGL`` for ``egl``; others assumed present)."""
    backend = gl_backend()
    lib = {"osmesa": "OSMesa", "egl": "EGL"}.get(backend)
    if lib and not ctypes.util.find_library(lib):
        return False, (f"MUJOCO_GL={backend}: lib{lib} not found; install it with "
                       f"'apt-get install -y {'libosmesa6' if lib == 'OSMesa' else 'libegl1'}' "
                       "(scripts/setup.sh does this for OSMesa)")
    try:
        import OpenGL  # noqa: F401  (PyOpenGL: a fightlab dependency)
    except ImportError:
        return False, "PyOpenGL is not installed (pip install pyopengl)"
    return True, f"MUJOCO_GL={backend}"


def select_gl() -> None:
    """Point mujoco's offscreen renderer at OSMesa unless the user chose a backend (call it after
    :func:`gl_available` and before making a ``mujoco.Renderer``)."""
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    backend = gl_backend()
    if backend == "osmesa":
        os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
    from mujoco.rendering.classic import gl_context, renderer  # noqa: F401

    if getattr(gl_context, "_MUJOCO_GL", None) != backend:
        importlib.reload(gl_context)   # mujoco read MUJOCO_GL when it was imported: choose again


def render_model(body: str):
    """The body's ``mujoco.MjModel`` with a light gradient sky added (only for pictures: the same
    bodies, joints and qpos layout as ``fightlab.bodies.build(body)``; physics unchanged).
    Raises ValueError for an unknown body (naming the choices)."""
    import mujoco

    from fightlab.bodies import build_spec

    spec = build_spec(body)                  # validates the name
    spec.add_texture(name="figure_sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
                     builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT, rgb1=[1.0, 1.0, 1.0],
                     rgb2=[0.82, 0.86, 0.90], width=64, height=64)
    return spec.compile()


def _stance_data(model):
    import mujoco

    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stance").id)
    mujoco.mj_forward(model, data)
    return data


def camera(model, data, azimuth: float, elevation: float, distance: float | None,
           lookat_z: float | None = None):
    """A free ``mujoco.MjvCamera`` looking at the pelvis of ``data`` (x, y of its position; height
    ``lookat_z`` [m], default half the head height) from ``azimuth`` / ``elevation`` [deg] and
    ``distance`` [m] (default 2.6 m). Call it per frame to follow the body."""
    import mujoco

    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    pelvis = data.xpos[model.body("pelvis").id]
    z = 0.5 * float(data.xpos[model.body("head").id][2]) if lookat_z is None else lookat_z
    cam.lookat[:] = [pelvis[0], pelvis[1], z]
    cam.distance = distance if distance is not None else 2.6
    cam.azimuth = azimuth
    cam.elevation = elevation
    return cam


def render_stance(body: str, width: int = 480, height: int = 640, azimuth: float = 145.0,
                  elevation: float = -12.0, distance: float | None = None) -> np.ndarray:
    """Render ``body`` standing in its ``stance`` keyframe; returns uint8 RGB ``[height, width, 3]``.
    The view is :func:`camera`'s (its default distance the same for both bodies: they share a
    scale). Raises ValueError for an unknown body (names the choices) or a non-positive size,
    RuntimeError without an offscreen GL library (the message says what to install)."""
    if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
        raise ValueError(f"width and height must be positive ints, got {width!r} x {height!r}")
    model = render_model(body)              # validates the name first
    ok, reason = gl_available()
    if not ok:
        raise RuntimeError(f"cannot render {body!r}: {reason}")
    select_gl()
    import mujoco

    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    data = _stance_data(model)
    renderer = mujoco.Renderer(model, height=height, width=width)
    try:
        # show every geom group: the muscular body's bones are visual-only geoms in group 3,
        # which MuJoCo hides by default
        opt = mujoco.MjvOption()
        opt.geomgroup[:] = 1
        renderer.update_scene(data, camera=camera(model, data, azimuth, elevation, distance),
                              scene_option=opt)
        return renderer.render().copy()
    finally:
        renderer.close()


def figure1(bodies: tuple[str, ...] = FIGURE1_BODIES, width: int = 480, height: int = 640, **camera):
    """Figure 1: the bodies side by side in the stance (one panel each, titled with nv and geoms).

    Returns a matplotlib Figure; save it with ``fightlab.figures.style.savefig(fig, "figure1_bodies", root)``.
    """
    import matplotlib.pyplot as plt

    from fightlab.bodies import build
    from fightlab.bodies.describe import describe

    fig, axes = plt.subplots(1, len(bodies), figsize=(3.2 * len(bodies), 3.2 * height / width + 0.4),
                             squeeze=False)
    for ax, body in zip(axes[0], bodies):
        info = describe(build(body))
        ax.imshow(render_stance(body, width=width, height=height, **camera))
        ax.set_title(f"{body}\n{info['nv']} DOF, {info['ngeom']} geoms", fontsize=11)
        ax.set_axis_off()
    fig.tight_layout()
    return fig


def bodies_table(root: Path | str = REPO_ROOT) -> "pd.DataFrame":  # noqa: F821
    """One column per body: static sizes, fallen contacts/rows and the slot sizes chosen.

    Rows: nv; tree depth [DOF levels] (levels of the sparse LDLᵀ factor); bodies (without the
    world body); geoms; ellipsoid muscles; actuators; mass [kg]; contacts and constraint rows when
    fallen (maximum per world over the latest ``data/results/slots.csv`` row of the body: limp
    bodies pushed over on the H200) and the slot sizes ``fightlab.sim.physics.SLOTS`` uses
    (nconmax, njmax per world). Missing measurements show as NaN.
    """
    import pandas as pd

    from fightlab import results
    from fightlab.bodies import build
    from fightlab.bodies.describe import describe
    from fightlab.sim.physics import SLOTS

    slots = results.read_rows("slots", root)
    cols = {}
    for body in FIGURE1_BODIES:
        info = describe(build(body))
        rows = slots[slots["body"] == body].sort_values("time")
        last = rows.iloc[-1] if len(rows) else None
        fallen = lambda c: float(last[c]) if last is not None else float("nan")  # noqa: E731
        cols[body] = {
            "nv [DOF]": info["nv"],
            "tree depth [DOF levels]": info["tree_depth"],
            "bodies without the world body [count]": info["nbody_without_world"],
            "geoms [count]": info["ngeom"],
            "ellipsoid muscles [count]": info["n_ellipsoid_muscles"],
            "actuators [count]": info["nu"],
            "mass [kg]": round(info["mass_kg"], 2),
            "contacts when fallen, max per world [count]": fallen("ncon_max"),
            "constraint rows when fallen, max per world [count]": fallen("nefc_max"),
            "fall measurement [worlds x s]": (f"{int(last['nworld'])} x {last['seconds']:g} s, {last['gpu']}"
                                              if last is not None else "not measured"),
            "slot nconmax per world [count]": SLOTS[body].nconmax,
            "slot njmax per world [count]": SLOTS[body].njmax,
        }
    return pd.DataFrame(cols)


__all__ = ["FIGURE1_BODIES", "bodies_table", "camera", "figure1", "gl_available", "gl_backend",
           "render_model", "render_stance", "select_gl"]
