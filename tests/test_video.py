"""fightlab.figures.video and `python -m fightlab render`: one world's episode as an MP4 and a GIF,
on the CPU (OSMesa), at tiny sizes; bad input is one line and exit 2; outputs never overwritten."""
import hashlib
import sys

import numpy as np
import pytest

from fightlab.cli import main
from fightlab.config import ConfigError, PPOConfig, TrainConfig
from fightlab.figures import video
from fightlab.run.runner import Trainer

_OK, _REASON = video.render_available()
needs_render = pytest.mark.skipif(not _OK, reason=f"cannot render here ({_REASON}); scripts/setup.sh "
                                                  "installs libosmesa6, pip install imageio imageio-ffmpeg")
TINY = ["--seconds", "0.5", "--fps", "20", "--width", "96", "--height", "96", "--no-progress"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A one-iteration training of the simple body on the CPU: its run folder (latest.pt)."""
    d = tmp_path_factory.mktemp("render") / "simple-tiny"
    cfg = TrainConfig(body="simple", nworld=2, device="cpu", seed=3, max_iterations=1, run_dir=str(d),
                      checkpoint_every=0, ppo=PPOConfig(num_steps=4, num_minibatches=1, update_epochs=1))
    Trainer(cfg, progress=False).train()
    return d


def _frames(path):
    import imageio.v3 as iio

    plugin = "FFMPEG" if path.suffix == ".mp4" else "pillow"
    return iio.imread(path, plugin=plugin, index=None)


@needs_render
def test_render_writes_a_decodable_mp4_and_a_small_gif_beside_the_run(tiny_run, capsys):
    ck = tiny_run / "latest.pt"
    assert main(["render", str(ck), *TINY]) == 0
    out = capsys.readouterr().out
    mp4 = tiny_run / "video" / "episode-it000001-seed1.mp4"
    gif = mp4.with_suffix(".gif")
    assert str(mp4) in out and str(gif) in out
    f = _frames(mp4)
    assert f.shape == (10, 96, 96, 3) and f.dtype == np.uint8   # 0.5 s at 20 fps
    assert f.std() > 5, "a blank video"
    g = _frames(gif)
    assert g.shape[0] == 5 and g.shape[1:3] == (96, 96)          # 10 fps, no wider than the MP4
    assert gif.stat().st_size < 200_000
    assert not list(mp4.parent.glob(".*partial*")), "a temporary was left behind"
    # an existing output is refused, byte for byte untouched; --force replaces it
    before = hashlib.sha256(mp4.read_bytes()).hexdigest()  # a digest: a failing bytes diff is slow
    assert main(["render", str(ck), *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and str(mp4) in err and "--force" in err
    assert hashlib.sha256(mp4.read_bytes()).hexdigest() == before
    # a fresh training in the same folder deletes only what the trainer wrote: the video stays
    cfg = TrainConfig(body="simple", nworld=2, device="cpu", seed=3, max_iterations=1,
                      run_dir=str(tiny_run), checkpoint_every=0,
                      ppo=PPOConfig(num_steps=4, num_minibatches=1, update_epochs=1))
    Trainer(cfg, progress=False).train()
    assert hashlib.sha256(mp4.read_bytes()).hexdigest() == before and gif.exists()


@needs_render
def test_zero_action_video_counts_and_marks_its_pushes(tmp_path):
    out = tmp_path / "mine" / "zero.mp4"
    res = video.render_episode(None, out=out, body="simple", zero_action=True, seconds=3.2, fps=10,
                               width=96, height=96, gif=False, seed=2, progress=False)
    assert res["mp4"] == out and res["gif"] is None and not out.with_suffix(".gif").exists()
    assert res["frames"] == 32 and res["zero_action"] and res["iteration"] is None
    assert res["pushes"] >= 1          # the first push comes 1–3 s after the reset
    assert isinstance(res["falls"], int) and res["falls"] >= 0
    f = _frames(out).astype(int)
    orange = [int(((x[..., 0] > 180) & (x[..., 1] > 60) & (x[..., 1] < 160) & (x[..., 2] < 90)).sum())
              for x in f]
    assert orange[0] == 0 and max(orange) > 0, "no push arrow / note drawn"


@pytest.mark.parametrize("args, expect", [
    (["render"], "render needs a CHECKPOINT, or --zero-action with --body B (valid bodies: "),
    (["render", "--zero-action"], "render needs a CHECKPOINT, or --zero-action with --body B"),
    (["render", "missing.pt"], "checkpoint 'missing.pt' does not exist"),
    (["render", ""], "render needs a CHECKPOINT file, got ''"),
    (["render", "--zero-action", "--body", "robot"], "unknown body 'robot'; valid bodies: muscular-fast, simple"),
    (["render", "--zero-action", "--body", "simple", "--seconds", "0"], "seconds must be a number in (0, 600]"),
    (["render", "--zero-action", "--body", "simple", "--seconds", "-1"], "got -1.0"),
    (["render", "--zero-action", "--body", "simple", "--seconds", "nan"], "got nan"),
    (["render", "--zero-action", "--body", "simple", "--fps", "0"], "fps must be an integer in [1, 120], got 0"),
    (["render", "--zero-action", "--body", "simple", "--width", "97"], "width must be an even integer in [16, 3840]"),
    (["render", "--zero-action", "--body", "simple", "--height", "8"], "height must be an even integer"),
    (["render", "--zero-action", "--body", "simple", "--gif-fps", "0"], "gif_fps must be an integer"),
    (["render", "--zero-action", "--body", "simple", "--amplitude", "2"], "amplitude must be in [0, 1], got 2.0"),
    (["render", "--zero-action", "--body", "simple", "--device", "tpu"], "device must be 'cpu', 'cuda' or 'cuda:N'"),
    (["render", "--zero-action", "--body", "simple", "--out", "clip.avi"], "must be an .mp4 file"),
    (["render", "--zero-action", "--body", "simple", "--out", ""], "must name an .mp4 file, got ''"),
])
def test_render_cli_errors(args, expect, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err and err.count("\n") == 1, err


def test_render_refuses_a_checkpoint_of_another_body(tiny_run, tmp_path, capsys):
    assert main(["render", str(tiny_run / "latest.pt"), "--body", "muscular-fast",
                 "--out", str(tmp_path / "x.mp4")]) == 2
    assert "conflicts with the checkpoint's body (simple)" in capsys.readouterr().err


def test_render_without_gl_or_video_library_says_what_to_install(tmp_path, monkeypatch, capsys):
    from fightlab.figures import bodies

    out = str(tmp_path / "x.mp4")
    why = "MUJOCO_GL=osmesa: libOSMesa not found; install it with 'apt-get install -y libosmesa6'"
    monkeypatch.setattr(bodies, "gl_available", lambda: (False, why))
    assert main(["render", "--zero-action", "--body", "simple", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "cannot render" in err and "libosmesa6" in err and err.count("\n") == 1
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)   # import fails
    assert main(["render", "--zero-action", "--body", "simple", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "pip install imageio imageio-ffmpeg" in err and err.count("\n") == 1
    assert not (tmp_path / "x.mp4").exists()
    with pytest.raises(video.RenderError):
        video.render_episode(None, out=out, body="simple", zero_action=True)
    assert issubclass(video.RenderError, ConfigError)


ZERO = ["render", "--zero-action", "--body", "simple", "--seconds", "0.2", "--fps", "10", "--width", "32",
        "--height", "32", "--gif-width", "16", "--no-progress"]


def _no_simulation(monkeypatch):
    from fightlab.envs import stance

    def fail(*a, **k):
        raise AssertionError("simulated before refusing")
    monkeypatch.setattr(stance, "StanceEnv", fail)


def _after_simulation(monkeypatch, then):
    """Run `then()` when the episode's env closes (after the simulation, before the drawing)."""
    from fightlab.envs import stance

    class Env(stance.StanceEnv):
        def close(self):
            super().close()
            then()
    monkeypatch.setattr(stance, "StanceEnv", Env)


@needs_render
def test_an_unwritable_output_is_one_line_before_any_simulation(monkeypatch, capsys):
    _no_simulation(monkeypatch)
    assert main([*ZERO, "--out", "/proc/x.mp4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and err.count("\n") == 1 and "'/proc'" in err, err


@needs_render
def test_a_user_file_named_like_the_temporary_is_refused_and_kept(tmp_path, monkeypatch, capsys):
    _no_simulation(monkeypatch)
    mine = tmp_path / ".clip.partial.gif"
    mine.write_text("mine")
    assert main([*ZERO, "--out", str(tmp_path / "clip.mp4")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(mine) in err and "not this render's" in err, err
    assert mine.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".clip.partial.gif"]   # its MP4 claim removed


@needs_render
def test_gif_frames_over_the_memory_limit_are_refused_up_front(tmp_path, monkeypatch, capsys):
    _no_simulation(monkeypatch)
    args = ["render", "--zero-action", "--body", "simple", "--seconds", "600", "--fps", "120", "--width", "3840",
            "--height", "3840", "--gif-width", "3840", "--gif-fps", "120", "--out", str(tmp_path / "big.mp4")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GiB of memory" in err and "limit of 2 GiB" in err and "72000" in err, err
    assert not list(tmp_path.iterdir())
    # without the GIF, nothing is held: the same sizes pass this check (sim refused by the stub)
    with pytest.raises(AssertionError, match="simulated before"):
        video.render_episode(None, out=tmp_path / "big.mp4", body="simple", zero_action=True, seconds=600,
                             fps=120, width=3840, height=3840, gif=False, progress=False)
    assert not list(tmp_path.iterdir()), "a temporary was left behind"


@needs_render
def test_frames_stream_to_the_writer_one_at_a_time(tmp_path, monkeypatch):
    import imageio.v2 as iio2

    real, log = iio2.get_writer, []

    class Spy:
        def __init__(self, *a, **k):
            self.w = real(*a, **k)

        def append_data(self, im):
            assert im.shape == (32, 32, 3)
            log.append("append")
            self.w.append_data(im)

        def close(self):
            self.w.close()

    import mujoco

    class Renderer(mujoco.Renderer):
        def render(self, *a, **k):
            log.append("draw")
            return super().render(*a, **k)

    monkeypatch.setattr(iio2, "get_writer", Spy)
    monkeypatch.setattr(mujoco, "Renderer", Renderer)
    out = tmp_path / "s.mp4"
    res = video.render_episode(None, out=out, body="simple", zero_action=True, seconds=0.3, fps=10,
                               width=32, height=32, gif_width=16, progress=False)
    assert log == ["draw", "append"] * 3 and res["frames"] == 3 and res["gif_frames"] == 3
    assert _frames(out).shape == (3, 32, 32, 3) and _frames(res["gif"]).shape[1:3] == (16, 16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.gif", "s.mp4"]


@needs_render
def test_a_failing_video_writer_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    import imageio.v2 as iio2

    class Broken:
        def __init__(self, *a, **k):
            pass

        def append_data(self, im):
            raise OSError("[Errno 32] Broken pipe\n\nFFMPEG COMMAND:\nffmpeg -y ...\n\nFFMPEG STDERR OUTPUT:\n")

        def close(self):
            pass

    monkeypatch.setattr(iio2, "get_writer", Broken)
    out = tmp_path / "v" / "clip.mp4"
    assert main([*ZERO, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err and "Broken pipe" in err and "FFMPEG" not in err, err
    assert not list(tmp_path.iterdir()), "a temporary (or the folder made for it) was left behind"


@needs_render
def test_an_output_created_while_rendering_is_never_overwritten(tmp_path, monkeypatch, capsys):
    out = tmp_path / "clip.mp4"
    _after_simulation(monkeypatch, lambda: out.write_text("written meanwhile"))
    assert main([*ZERO, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "appeared while rendering" in err and str(out) in err, err
    assert out.read_text() == "written meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]   # no GIF, no temporaries
    # the GIF appearing: the MP4 this render published is taken back too
    out.unlink()
    gif = out.with_suffix(".gif")

    monkeypatch.undo()
    _after_simulation(monkeypatch, lambda: gif.write_text("mine"))
    assert main([*ZERO, "--out", str(out)]) == 2
    assert "appeared while rendering" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.gif"] and gif.read_text() == "mine"
    # with --force the file is replaced
    monkeypatch.undo()
    _after_simulation(monkeypatch, lambda: out.write_text("written meanwhile"))
    assert main([*ZERO, "--out", str(out), "--force"]) == 0
    capsys.readouterr()
    assert _frames(out).shape == (2, 32, 32, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.gif", "clip.mp4"]
