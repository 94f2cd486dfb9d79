"""fightlab.figures.bodies: Figure 1 renders on the CPU (OSMesa), the body table, notebook 01."""

import json

import numpy as np
import pytest

from fightlab.figures import bodies as render
from fightlab.reproduce import reproduce
from fightlab.sim.physics import SLOTS

_GL_OK, _GL_REASON = render.gl_available()
needs_gl = pytest.mark.skipif(not _GL_OK, reason=f"offscreen GL library missing ({_GL_REASON}); "
                                                 "scripts/setup.sh installs libosmesa6")


def test_gl_backend_respects_the_user(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    assert render.gl_backend() == "osmesa"
    monkeypatch.setenv("MUJOCO_GL", "EGL")
    assert render.gl_backend() == "egl"


@needs_gl
def test_render_stance_both_bodies():
    imgs = {b: render.render_stance(b, width=64, height=80) for b in render.FIGURE1_BODIES}
    for b, img in imgs.items():
        assert img.shape == (80, 64, 3) and img.dtype == np.uint8
        assert img.std() > 5, f"{b}: a blank picture"
    assert not np.array_equal(*imgs.values())


@needs_gl
def test_figure1_saves_png_and_svg(tmp_path):
    from fightlab.figures.style import savefig

    fig = render.figure1(width=48, height=64)
    paths = savefig(fig, "figure1_bodies", root=tmp_path)
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 0 for p in paths)


def test_render_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown body"):
        render.render_stance("robot", width=8, height=8)
    with pytest.raises(ValueError, match="positive"):
        render.render_stance("simple", width=0, height=8)


def test_bodies_table():
    t = render.bodies_table()
    assert list(t.columns) == list(render.FIGURE1_BODIES)
    assert t.loc["nv [DOF]", "muscular-fast"] == 89 and t.loc["nv [DOF]", "simple"] == 43
    assert t.loc["ellipsoid muscles [count]", "muscular-fast"] == 63
    for b in render.FIGURE1_BODIES:
        assert t.loc["slot njmax per world [count]", b] == SLOTS[b].njmax
        assert t.loc["slot nconmax per world [count]", b] == SLOTS[b].nconmax
        # the slot covers the measured fallen maximum
        assert t.loc["constraint rows when fallen, max per world [count]", b] <= SLOTS[b].njmax


def test_bodies_table_without_measurements(tmp_path):
    t = render.bodies_table(tmp_path)          # no data/results/slots.csv there
    assert np.isnan(t.loc["contacts when fallen, max per world [count]", "simple"])


@needs_gl
def test_bodies_notebook_runs_at_smoke_size(tmp_path):
    assert reproduce(only=["01"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    text = json.dumps(json.loads((tmp_path / "01_bodies-smoke.ipynb").read_text()))
    assert "figure1_bodies.png" in text and "tree depth" in text
