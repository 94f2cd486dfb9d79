"""One world's episode as a video: a saved policy (or the zero-action policy) standing through the
env's pushes, drawn by MuJoCo's renderer (``python -m fightlab render CHECKPOINT``).

    from fightlab.figures import video
    ok, why = video.render_available()                  # GL library and the video library
    res = video.render_episode("runs/train/simple-1024-s0/latest.pt", seconds=5)
    res["mp4"], res["gif"], res["frames"], res["pushes"], res["falls"]

One world (nworld = 1) runs the deterministic mean action at a fixed amplitude, exactly as
``fightlab.run.evaluate`` does: the env's own pushes, fall checks and resets, seeded by ``seed``.
After every control step world 0's qpos and the force on its torso are read to the host (one
world, not the training loop: the reads are fine here). Each frame is drawn with
``mujoco.Renderer`` (OSMesa on a CPU, see :mod:`fightlab.figures.bodies`) from a camera that
follows the pelvis; a push is an orange arrow into the torso along the push, with its impulse
written in the corner, and a fall (the env resets the world in the same step) a red "fall" note.

The MP4 is H.264 through imageio's ffmpeg plugin (``imageio-ffmpeg`` bundles an ffmpeg binary),
streamed: each frame goes to ffmpeg as it is drawn, so only the GIF's frames are held in memory
(refused up front beyond :data:`MAX_GIF_BYTES`). The GIF, for a README, is downscaled to
``gif_width`` pixels at ``gif_fps`` frames per second through imageio's pillow plugin. Default
output: ``<run folder>/video/episode-it<N>-seed<S>.mp4`` (+ ``.gif``) beside a checkpoint in a
fightlab run folder, else under ``runs/video/``.

Outputs are written to temporaries beside them (``.<name>.partial.mp4``, ``.gif``), claimed
before the simulation starts and published at the end without overwriting a file unless
``force`` (:func:`render_episode`'s Raises says each refusal).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from pathlib import Path

import numpy as np

from fightlab.config import ConfigError
from fightlab.paths import RUNS

__all__ = ["RenderError", "default_output", "render_available", "render_episode", "validate_video"]

#: how long a push's arrow and a fall's note stay on screen after they start [s] (a push itself
#: lasts push_duration_s = 0.1 s, too short to see at video speed)
PUSH_MARK_S = 0.5
FALL_MARK_S = 0.8
#: the largest frame side and frame rate accepted
MAX_SIDE = 3840
MAX_FPS = 120
#: the most memory the GIF's frames (held until the GIF is written) may take [bytes]
MAX_GIF_BYTES = 2 * 1024 ** 3
_PUSH_RGBA = np.array([1.0, 0.45, 0.0, 1.0], np.float32)


class RenderError(ConfigError):
    """Rendering cannot run here: no offscreen GL library or no video library (the message says
    what to install), or the video writer failed (the message names the file)."""


def render_available() -> tuple[bool, str]:
    """(ok, reason): whether an episode can be rendered and written here: the offscreen GL
    library (``fightlab.figures.bodies.gl_available``: OSMesa, ``apt-get install -y libosmesa6``)
    and the video library (``imageio`` with ``imageio-ffmpeg``, whose wheel bundles ffmpeg)."""
    from fightlab.figures.bodies import gl_available

    ok, reason = gl_available()
    if not ok:
        return False, reason
    try:
        import imageio.v3  # noqa: F401
        import imageio_ffmpeg
    except ImportError as e:
        return False, (f"the video library is missing ({e.name}): pip install imageio imageio-ffmpeg")
    try:
        imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as e:
        return False, f"imageio-ffmpeg finds no ffmpeg binary ({e}): pip install --force-reinstall imageio-ffmpeg"
    return True, reason


def _positive_int(name: str, v, lo: int, hi: int, even: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi or (even and v % 2):
        raise ConfigError(f"{name} must be {'an even' if even else 'an'} integer in [{lo}, {hi}]"
                          f"{' (H.264 frames have even sides)' if even else ''}, got {v!r}")
    return int(v)


def validate_video(seconds: float = 5.0, fps: int = 30, width: int = 640, height: int = 480,
                   gif_width: int = 320, gif_fps: int = 10) -> tuple:
    """Check a video's sizes before any work; returns them as (float, int, int, int, int, int).

    seconds: simulated s in (0, 600]; fps, gif_fps: 1..120; width, height: even, 16..3840 pixels;
    gif_width: 16..3840 pixels. Raises ConfigError naming the bad value and the valid range.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
            math.isfinite(seconds) and 0 < seconds <= 600):
        raise ConfigError(f"seconds must be a number in (0, 600] (simulated seconds), got {seconds!r}")
    return (float(seconds), _positive_int("fps", fps, 1, MAX_FPS),
            _positive_int("width", width, 16, MAX_SIDE, even=True),
            _positive_int("height", height, 16, MAX_SIDE, even=True),
            _positive_int("gif_width", gif_width, 16, MAX_SIDE),
            _positive_int("gif_fps", gif_fps, 1, MAX_FPS))


def default_output(checkpoint=None, iteration: int | None = None, seed: int = 1,
                   zero_action: bool = False, body: str | None = None,
                   run_id: str | None = None) -> Path:
    """Where :func:`render_episode` writes by default (the ``.mp4``; the GIF beside it).

    Beside a checkpoint in a fightlab run folder (one holding ``.fightlab-run.json``):
    ``<folder>/video/episode-it<iteration:06d>-seed<seed>[-zero-action].mp4``; a checkpoint
    elsewhere: ``runs/video/<run_id>/...`` (the same name); no checkpoint:
    ``runs/video/<body>-zero-action-seed<seed>.mp4``. Paths resolve from the repository.
    """
    from fightlab.rundir import MANIFEST

    if checkpoint is None:
        return RUNS / "video" / f"{body}-zero-action-seed{seed}.mp4"
    name = f"episode-it{iteration:06d}-seed{seed}{'-zero-action' if zero_action else ''}.mp4"
    folder = Path(checkpoint).resolve().parent
    if (folder / MANIFEST).is_file():
        return folder / "video" / name
    return RUNS / "video" / str(run_id) / name


def _outputs(out: Path, gif: bool, force: bool) -> tuple[Path, Path | None]:
    """(the MP4, the GIF beside it or None), refused up front if a folder, or existing without force."""
    if out.suffix.lower() != ".mp4":
        raise ConfigError(f"the output must be an .mp4 file (the GIF goes beside it), got {str(out)!r}")
    gif_path = out.with_suffix(".gif") if gif else None
    for p in filter(None, (out, gif_path)):
        if p.is_dir():
            raise ConfigError(f"output {str(p)!r} is a folder; name an .mp4 file")
        if (p.exists() or p.is_symlink()) and not force:
            raise ConfigError(f"output {str(p)!r} exists: fightlab does not overwrite a file; "
                              "choose another --out or pass --force")
    return out, gif_path


def _run_episode(body, ck, env_cfg, nsteps, device, seed, zero_action, amplitude, tree_factor,
                 progress):
    """Step one world `nsteps` times; returns (qpos [nsteps+1, nq] float64, force [nsteps+1, 3]
    float64 (the push on the torso during the step that ended there), fall [nsteps+1] bool, the
    env's MjModel, the torso body id, sim seconds)."""
    import torch
    from tqdm import tqdm

    from fightlab.envs.stance import StanceEnv
    from fightlab.run.checkpoint import policy_agent
    from fightlab.devices import announce_compile
    from fightlab.sim.physics import shared_stream

    announce_compile(body, device)  # building the env compiles warp's kernels
    bar = tqdm(total=nsteps, desc=f"render {body}: simulate", unit="step", disable=not progress)
    t0 = time.perf_counter()
    env = StanceEnv(body, 1, device, seed=seed, cfg=env_cfg, graph=True, tree_factor=tree_factor)
    agent = policy_agent(ck, env, device) if ck is not None and not zero_action else None
    qpos = np.zeros((nsteps + 1, env.mjm.nq))
    force = np.zeros((nsteps + 1, 3))
    fall = np.zeros(nsteps + 1, bool)
    try:
        with shared_stream(device):
            env.set_amplitude(amplitude, immediate=True)
            obs = env.reset(stagger=False)
            qpos[0] = env.d.qpos.numpy()[0]
            zero = torch.zeros(1, env.nu, device=torch.device(device))
            for i in range(1, nsteps + 1):
                with torch.no_grad():
                    a = zero if agent is None else agent.act_mean(obs)
                obs, _, _, info = env.step(a)
                qpos[i] = env.d.qpos.numpy()[0]          # after a fall: the reset pose
                force[i] = env.d.xfrc_applied.numpy()[0, env.torso_id, :3]
                fall[i] = bool(info["fall"][0].item())
                bar.update(1)
        mjm, torso = env.mjm, env.torso_id
    finally:
        bar.close()
        env.close()
    return qpos, force, fall, mjm, torso, time.perf_counter() - t0


def _push_starts(force: np.ndarray) -> list[int]:
    """Indices where a push begins: a force on the torso that was absent (or different) a step before."""
    on = np.linalg.norm(force, axis=1) > 0
    return [i for i in range(len(force))
            if on[i] and (i == 0 or not on[i - 1] or not np.allclose(force[i], force[i - 1]))]


def _arrow(scene, tip: np.ndarray, direction: np.ndarray, length: float) -> None:
    """Add an arrow to a mjvScene ending near `tip` [m], pointing along `direction` (unit)."""
    import mujoco

    if scene.ngeom >= scene.maxgeom:
        return
    g = scene.geoms[scene.ngeom]
    mujoco.mjv_initGeom(g, mujoco.mjtGeom.mjGEOM_ARROW, np.zeros(3), np.zeros(3), np.zeros(9), _PUSH_RGBA)
    g.emission = 0.6   # bright whatever the light
    end = tip - 0.12 * direction
    mujoco.mjv_connector(g, mujoco.mjtGeom.mjGEOM_ARROW, 0.05, end - length * direction, end)
    scene.ngeom += 1


def _overlay(img: np.ndarray, lines: list[tuple[str, tuple[int, int, int]]], corner: str) -> np.ndarray:
    """Write text lines [(text, rgb)] into a corner ("tl" or "tr") of an RGB uint8 image."""
    from PIL import Image, ImageDraw, ImageFont

    h, w = img.shape[:2]
    size = max(9, h // 22)
    try:
        font = ImageFont.load_default(size=size)
    except (TypeError, OSError):  # a Pillow without FreeType: the fixed bitmap font
        font = ImageFont.load_default()
    pic = Image.fromarray(img)
    draw = ImageDraw.Draw(pic)
    y = 4
    for text, rgb in lines:
        x = 5 if corner == "tl" else w - 5 - int(draw.textlength(text, font=font))
        draw.text((x, y), text, fill=rgb, font=font, stroke_width=max(1, size // 10), stroke_fill=(255, 255, 255))
        y += size + 3
    return np.asarray(pic)


def _render_frames(body, mjm, torso_env, qpos, force, fall, steps, times, width, height, env_cfg,
                   label, progress, azimuth=145.0, elevation=-10.0, distance=3.2):
    """Draw one frame per entry of `steps` (index into qpos); yields uint8 [height, width, 3]
    frames one at a time (the caller streams them; none is kept here)."""
    import mujoco
    from tqdm import tqdm

    from fightlab.figures.bodies import camera, render_model, select_gl

    select_gl()
    model = render_model(body)
    if (model.nq, model.nbody) != (mjm.nq, mjm.nbody):
        raise ValueError(f"render model of {body!r} (nq {model.nq}) does not match the env's (nq {mjm.nq})")
    torso = model.body(mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_BODY, torso_env)).id
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    data = mujoco.MjData(model)
    opt = mujoco.MjvOption()
    opt.geomgroup[:] = 1   # the muscular body's bones are visual geoms in group 3
    dt = env_cfg.control_dt
    mark_push = max(1, int(round(PUSH_MARK_S / dt)))
    mark_fall = max(1, int(round(FALL_MARK_S / dt)))
    starts = _push_starts(force)
    falls = np.flatnonzero(fall)
    hi = max(env_cfg.push_impulse_ns)
    data.qpos[:] = qpos[0]
    mujoco.mj_kinematics(model, data)
    look_z = 0.5 * float(data.xpos[model.body("head").id][2])  # the stance's: steady through falls
    renderer = mujoco.Renderer(model, height=height, width=width)
    try:
        for s, t in tqdm(list(zip(steps, times)), desc=f"render {body}: draw", unit="frame",
                         disable=not progress):
            data.qpos[:] = qpos[s]
            mujoco.mj_kinematics(model, data)
            renderer.update_scene(data, camera=camera(model, data, azimuth, elevation, distance, look_z),
                                  scene_option=opt)
            notes = [(f"t = {t:4.2f} s", (30, 30, 30))]
            push = [p for p in starts if p <= s < p + mark_push]
            if push:
                f = force[push[-1]]
                mag = float(np.linalg.norm(f))
                impulse = mag * env_cfg.push_duration_s
                _arrow(renderer.scene, data.xpos[torso].copy(), f / mag, 0.3 + 0.4 * impulse / hi)
                notes.append((f"push {impulse:.0f} N·s", (220, 100, 0)))
            if any(p <= s < p + mark_fall for p in falls):
                notes.append(("fall: reset", (200, 0, 0)))
            img = renderer.render()
            img = _overlay(img, notes, "tl")
            yield _overlay(img, [(label, (60, 60, 60))], "tr")
    finally:
        renderer.close()


def _gif_plan(nframes: int, fps: int, gif_fps: int, width: int, height: int,
              gif_width: int) -> tuple[int, int, int, int]:
    """The GIF keeps every n-th frame (n = round(fps / gif_fps)), downscaled to at most
    `gif_width`; returns (n, frames kept, gif width, gif height)."""
    step = max(1, int(round(fps / gif_fps)))
    gw = min(gif_width, width)
    gh = max(2, int(round(height * gw / width)))
    return step, len(range(0, nframes, step)), gw, gh


def _check_gif_memory(nframes, fps, gif_fps, width, height, gif_width) -> None:
    """Refuse, before any work, a GIF whose frames would take more than MAX_GIF_BYTES."""
    _, n, gw, gh = _gif_plan(nframes, fps, gif_fps, width, height, gif_width)
    need = n * gw * gh * 3
    if need > MAX_GIF_BYTES:
        raise ConfigError(f"the GIF's {n} frames of {gw}x{gh} would take {need / 2 ** 30:.1f} GiB of "
                          f"memory, more than the limit of {MAX_GIF_BYTES / 2 ** 30:g} GiB: lower "
                          "--seconds, --gif-fps or --gif-width, or pass --no-gif")


class _Claims:
    """The temporaries fightlab created for one render (and the folders it made for them): each
    is created exclusively, remembered by its inode, and removed on failure only if the name still
    holds that file (never a file fightlab did not create)."""

    def __init__(self):
        self.files: dict[Path, tuple[int, int]] = {}   # temporary -> (st_dev, st_ino)
        self.folders: list[Path] = []

    def folder(self, folder: Path) -> None:
        missing = []
        f = folder
        while not f.exists() and f != f.parent:
            missing.append(f)
            f = f.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create the output folder {str(folder)!r}: "
                              f"{e.strerror or e}") from None
        self.folders.extend(missing)      # deepest first

    def claim(self, path: Path) -> Path:
        """Create `path`'s temporary exclusively (O_CREAT | O_EXCL); returns it."""
        self.folder(path.parent)
        tmp = path.with_name(f".{path.stem}.partial{path.suffix}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise ConfigError(f"{str(tmp)!r} exists and is not this render's temporary: fightlab "
                              "does not touch it; remove it or choose another --out") from None
        except OSError as e:
            raise ConfigError(f"cannot write in the output folder {str(path.parent)!r} "
                              f"({e.strerror or e}); choose another --out") from None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self.files[tmp] = (st.st_dev, st.st_ino)
        return tmp

    def take_back(self, path: Path, tmp: Path) -> None:
        """Remove `path` if it is the file created as `tmp` (the temporary itself, or its published
        name)."""
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if self.files.get(tmp) == (st.st_dev, st.st_ino):
                os.unlink(path)

    def cleanup(self) -> None:
        """Remove the temporaries still ours, then the folders made for them if left empty."""
        for tmp in self.files:
            self.take_back(tmp, tmp)
        for f in self.folders:
            try:
                f.rmdir()
            except OSError:
                break


def _publish(tmp: Path, path: Path, force: bool) -> None:
    """Move the finished temporary to `path`: without `force` through a hard link, which fails if
    `path` exists (a file that appeared while rendering is never overwritten); with it,
    os.replace."""
    try:
        if force:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:
            # a filesystem without hard links: claim the name exclusively, then replace our claim
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.replace(tmp, path)
            return
        os.unlink(tmp)
    except FileExistsError:
        raise ConfigError(f"output {str(path)!r} appeared while rendering: fightlab does not "
                          "overwrite a file (this render was discarded); choose another --out or "
                          "pass --force") from None
    except OSError as e:
        raise RenderError(f"cannot publish {str(tmp)!r} as {str(path)!r}: {e.strerror or e}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class _Mp4:
    """imageio's ffmpeg writer, fed one frame at a time (ffmpeg quiet); its errors become one
    RenderError naming the file."""

    def __init__(self, tmp: Path, out: Path, fps: int):
        import imageio.v2 as iio2

        self.tmp, self.out, self.seconds = tmp, out, 0.0
        self.w = self._call(iio2.get_writer, str(tmp), format="FFMPEG", mode="I", fps=fps,
                            codec="libx264", macro_block_size=2, ffmpeg_log_level="quiet")
        self.seconds = 0.0   # the writer's start counts as drawing (render_s), not writing

    def _fail(self, e: BaseException):
        raise RenderError(f"cannot write the video {str(self.out)!r} (through {self.tmp.name}): "
                          f"{_first_line(e)}") from None

    def _call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, its wall time added to ``seconds``, an error one RenderError."""
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            self._fail(e)
        finally:
            self.seconds += time.perf_counter() - t0

    def append(self, frame: np.ndarray) -> None:
        self._call(self.w.append_data, frame)

    def close(self) -> None:
        self._call(self.w.close)
        if self.tmp.stat().st_size == 0:
            self._fail(RuntimeError("ffmpeg wrote nothing (a full disk?)"))

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.w.close()


def render_episode(checkpoint=None, out=None, seconds: float = 5.0, fps: int = 30, width: int = 640,
                   height: int = 480, seed: int = 1, device: str = "cpu", gif: bool = True,
                   zero_action: bool = False, amplitude: float = 1.0, body: str | None = None,
                   force: bool = False, gif_width: int = 320, gif_fps: int = 10,
                   progress: bool = True) -> dict:
    """Render one world's episode of a saved policy (or the zero-action policy) to an MP4 and a GIF.

    Args:
      checkpoint: a fightlab checkpoint (its body, task config and policy); None with
        ``zero_action=True`` and ``body``: the servos holding the reference alone.
      out: the ``.mp4`` to write (a path the user typed stays relative to the cwd; the GIF goes
        beside it with ``.gif``); default :func:`default_output`.
      seconds: simulated seconds (> 0, at most 600); the episode resets after a fall, like training.
      fps: video frames per second (1..120); frame k shows the state at the control step nearest
        k / fps s. width, height: pixels of the MP4, even, 16..3840.
      seed: the env's seed (initial joint noise and the pushes). device: the env's device.
      gif: also write the GIF (``gif_width`` pixels wide, ``gif_fps`` frames per second).
      zero_action: run zero actions instead of the policy. amplitude: rhythm amplitude in [0, 1],
        fixed. force: overwrite existing outputs. progress: tqdm bars.

    Returns:
      dict: mp4 (Path), gif (Path or None), mp4_bytes, gif_bytes (int or None), frames (int),
      gif_frames, seconds (simulated s shown), fps, width, height, pushes (pushes begun in the
      video), falls (falls, each followed by a reset), body, run_id, iteration (None without a
      checkpoint), zero_action, seed, simulate_s, render_s, write_s (wall-clock s).

    Raises:
      ConfigError: before any simulation: a bad value (named, with the valid range), a non-.mp4
        output, an existing output without ``force``, an output folder that cannot be created or
        written (named), a temporary name (``.<name>.partial.mp4``/``.gif``) taken by a file that
        is not this render's, GIF frames over :data:`MAX_GIF_BYTES` (the estimate and the limit);
        at the end: an output that appeared while rendering, without ``force`` (the render is
        discarded, the file untouched). RenderError (a ConfigError): no GL or video library (the
        message says what to install), or the video writer or the publishing rename failed (the
        message names the file). CheckpointError: a missing or unreadable checkpoint.
      Every message is one line; on any failure the temporaries this call created are removed and
      no output is written.
    """
    from fightlab.bodies import BODY_NAMES
    from fightlab.config import EnvConfig, from_dict, validate_body, validate_env
    from fightlab.devices import validate_device
    from fightlab.run.checkpoint import load_checkpoint

    if checkpoint is not None and not str(checkpoint).strip():
        raise ConfigError(f"render needs a CHECKPOINT file, got {checkpoint!r}")
    if checkpoint is None and not (zero_action and body is not None):
        raise ConfigError("render needs a CHECKPOINT, or --zero-action with --body B "
                          f"(valid bodies: {', '.join(BODY_NAMES)})")
    seconds, fps, width, height, gif_width, gif_fps = validate_video(seconds, fps, width, height,
                                                                     gif_width, gif_fps)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    if isinstance(amplitude, bool) or not isinstance(amplitude, (int, float)) or not 0.0 <= amplitude <= 1.0:
        raise ConfigError(f"amplitude must be in [0, 1], got {amplitude!r}")
    device = validate_device(device)
    if checkpoint is None:  # zero_action with a body (checked above)
        body, ck, env_cfg, tree_factor = validate_body(body), None, EnvConfig(), True
        run_id = iteration = None
    else:
        ck = load_checkpoint(checkpoint)
        cfg = from_dict(ck["config"])
        if body is not None and body != cfg.body:
            raise ConfigError(f"body {body!r} conflicts with the checkpoint's body ({cfg.body})")
        body, env_cfg, tree_factor = cfg.body, cfg.env, cfg.tree_factor
        run_id, iteration = ck.get("run_id"), ck["iteration"]
    validate_env(env_cfg)
    if out is None:
        out = default_output(checkpoint, iteration, seed, zero_action, body, run_id)
    elif not str(out).strip():
        raise ConfigError(f"the output must name an .mp4 file, got {str(out)!r}")
    out, gif_path = _outputs(Path(out), gif, force)
    ok, why = render_available()
    if not ok:
        raise RenderError(f"cannot render: {why}")

    dt = env_cfg.control_dt
    nsteps = max(1, int(round(seconds / dt)))
    nframes = max(1, int(round(seconds * fps)))
    if gif_path is not None:
        _check_gif_memory(nframes, fps, gif_fps, width, height, gif_width)
    times = np.arange(nframes) / fps
    steps = np.minimum(np.rint(times / dt).astype(int), nsteps)
    claims = _Claims()
    try:
        mp4_tmp = claims.claim(out)
        gif_tmp = claims.claim(gif_path) if gif_path is not None else None
        res = _render_to(claims, mp4_tmp, gif_tmp, out, gif_path, force, body, ck, env_cfg,
                         nsteps, device, seed, zero_action, amplitude, tree_factor, progress,
                         iteration, nframes, times, steps, fps, width, height, gif_fps, gif_width)
    except BaseException:
        claims.cleanup()
        raise
    res.update(body=body, run_id=run_id, iteration=iteration, zero_action=zero_action or ck is None,
               seed=int(seed))
    return res


def _render_to(claims, mp4_tmp, gif_tmp, out, gif_path, force, body, ck, env_cfg, nsteps, device,
               seed, zero_action, amplitude, tree_factor, progress, iteration, nframes, times,
               steps, fps, width, height, gif_fps, gif_width) -> dict:
    """Simulate, draw and stream the frames into the claimed temporaries, then publish them."""
    import imageio.v3 as iio
    from PIL import Image

    qpos, push, fall, mjm, torso, sim_s = _run_episode(
        body, ck, env_cfg, nsteps, device, int(seed), zero_action, float(amplitude),
        tree_factor, progress)
    policy = "zero action" if (zero_action or ck is None) else f"it {iteration}"
    step, _, gw, gh = _gif_plan(nframes, fps, gif_fps, width, height, gif_width)
    small = []
    t0 = time.perf_counter()
    mp4 = _Mp4(mp4_tmp, out, fps)
    frames = _render_frames(body, mjm, torso, qpos, push, fall, steps, times, width, height,
                            env_cfg, f"{body} · {policy}", progress)
    try:
        for k, frame in enumerate(frames):
            mp4.append(frame)
            if gif_tmp is not None and k % step == 0:
                small.append(np.asarray(Image.fromarray(frame).resize((gw, gh), Image.LANCZOS)))
        frames.close()
        mp4.close()
    except BaseException:
        frames.close()
        mp4.abort()
        raise
    render_s = time.perf_counter() - t0 - mp4.seconds
    t0 = time.perf_counter()
    if gif_tmp is not None:
        try:
            iio.imwrite(gif_tmp, np.stack(small), plugin="pillow", extension=".gif",
                        duration=1000.0 * step / fps, loop=0)
        except Exception as e:
            raise RenderError(f"cannot write the GIF {str(gif_path)!r} (through {gif_tmp.name}): "
                              f"{_first_line(e)}") from None
    gif_frames = len(small)
    del small
    _publish(mp4_tmp, out, force)
    if gif_tmp is not None:
        try:
            _publish(gif_tmp, gif_path, force)
        except BaseException:
            claims.take_back(out, mp4_tmp)   # the MP4 just published is this render's: no half output
            raise
    write_s = time.perf_counter() - t0 + mp4.seconds
    shown = steps[-1]
    return dict(mp4=out, gif=gif_path, mp4_bytes=out.stat().st_size,
                gif_bytes=gif_path.stat().st_size if gif_path is not None else None,
                frames=nframes, gif_frames=gif_frames, seconds=nframes / fps, fps=fps, width=width,
                height=height, pushes=sum(1 for p in _push_starts(push) if p <= shown),
                falls=int(fall[:shown + 1].sum()), simulate_s=sim_s, render_s=render_s,
                write_s=write_s)
