"""The GPU primer (notebook 00): why a GPU, and how to time one honestly; the notebook only calls
these functions.

- Vector addition and SAXPY (``y = a*x + y``) as Warp kernels beside a device-to-device copy
  measured in the same run (:func:`vector_sweep`); Mandelbrot as a Warp kernel and in numpy
  (:func:`mandelbrot_study`); a tiny CNN training step in torch (:mod:`fightlab.measure.primer_cnn`).
- The closing table of ratios (:func:`ratios`), the article's cloud prices (:func:`cloud_prices`)
  and one ``primer`` result row per run (:func:`result_row`).

All timings come from :mod:`fightlab.timing`. On a CPU-only machine every function that compares
devices returns the CPU numbers and NaN for the GPU (see :func:`devices_for`).

Sources: the Numba documentation's Mandelbrot example (``create_fractal(-2.0, 1.0, -1.0, 1.0,
image, 20)`` on a 1024x1536 image) which the article reused; Warp docs ("Kernels", "Runtime");
M. Harris, "An Even Easier Introduction to CUDA" / "Six Ways to SAXPY" (NVIDIA blog) for SAXPY as
the first honest exercise and effective bandwidth = bytes read + written / time.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import warp as wp

from fightlab import results, timing
from fightlab.measure.primer_cnn import TinyCNN, cnn_study, load_digits  # the notebook's names
from fightlab.sizes import validate_size
from fightlab.paths import REPO_ROOT

__all__ = [
    "PrimerParams", "params_for", "devices_for", "vector_add", "saxpy",
    "check_vector_kernels", "vector_sweep", "mandelbrot_numpy", "mandelbrot_warp", "image_match",
    "mandelbrot_study", "load_digits", "TinyCNN", "cnn_study", "ratios", "cloud_prices",
    "CLOUD_PRICES", "PRIMER_METRICS", "result_row",
]

#: the cloud prices quoted by the GPU survival-toolkit article (see the file's source column)
CLOUD_PRICES = REPO_ROOT / "data" / "reference" / "cloud_prices.csv"

#: the Mandelbrot window of the Numba example the article reused: x in [-2, 1], y in [-1, 1]
MANDELBROT_WINDOW = (-2.0, 1.0, -1.0, 1.0)
GPU_MISSING = "needs a GPU: run with device='cuda:0' (or 'auto') on a machine with one"


# ----------------------------------------------------------------------------------------------
# parameters


@dataclass
class PrimerParams:
    """The notebook's parameters after validation and the smoke-size cut (see :func:`params_for`)."""

    size: str
    device: str
    vector_sizes: list[int]
    saxpy_a: float
    repeats: int
    warmup: int
    mandelbrot_shape: tuple[int, int]
    mandelbrot_max_iter: int
    cnn_image_px: int
    cnn_batch: int
    cnn_train_steps: int
    seed: int
    devices: list[str] = field(default_factory=list)


#: what size="smoke" cuts the full parameters down to (CPU, seconds)
SMOKE = dict(vector_sizes=[2**4, 2**10, 2**14, 2**18], repeats=3, warmup=1, mandelbrot_shape=(128, 192),
             cnn_image_px=16, cnn_train_steps=20)


def _int_at_least(name: str, v: Any, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return int(v)


def check_cpu_compiler(available: bool | None = None) -> None:
    """Every comparison runs Warp kernels on the CPU device too: that needs Warp's bundled CPU
    compiler (``warp/bin/warp-clang.so``), which some slimmed installs leave out. ``available``
    overrides ``wp.is_cpu_available()`` (tests). Raises RuntimeError when it is missing, saying
    where it belongs and how to restore it."""
    if not (wp.is_cpu_available() if available is None else available):
        where = Path(wp.__file__).parent / "bin" / "warp-clang.so"
        raise RuntimeError(
            "the primer compares Warp kernels on the CPU and the GPU, but this Warp cannot compile "
            f"CPU kernels: {where} is missing (a slimmed install). Reinstall the warp-lang wheel "
            "(pip install --force-reinstall warp-lang==" + wp.__version__ + ") or copy that file "
            "from the wheel.")


def params_for(*, size: str = "full", device: str = "auto",
               vector_sizes: Sequence[int] = (2**4, 2**8, 2**12, 2**16, 2**20, 2**22, 2**24, 2**26),
               saxpy_a: float = 2.0, repeats: int = 20, warmup: int = 3,
               mandelbrot_shape: Sequence[int] = (1024, 1536), mandelbrot_max_iter: int = 20,
               cnn_image_px: int = 64, cnn_batch: int = 32, cnn_train_steps: int = 300, seed: int = 0,
               has_cuda: Any = None) -> PrimerParams:
    """Validate the notebook's parameters; ``size="smoke"`` cuts them to a CPU-sized check.

    ``device`` goes through :func:`fightlab.timing.resolve_device` (``"auto"`` -> ``"cuda:0"``
    when Warp sees a GPU, else ``"cpu"``); :attr:`PrimerParams.devices` lists the devices every
    comparison runs on: always ``"cpu"``, plus the GPU when ``device`` is one.

    Raises:
        ValueError: naming the bad value (and the choices for ``size``/``device``). The notebook's
            ``publish`` meets :func:`fightlab.publish.check_publish` in its own first cell.
    """
    size = validate_size(size)
    check_cpu_compiler()
    dev = timing.resolve_device(device, has_cuda=has_cuda)
    sizes = sorted({_int_at_least("vector_sizes entry", n) for n in vector_sizes})
    if not sizes:
        raise ValueError("vector_sizes must hold at least one size")
    shape = tuple(_int_at_least("mandelbrot_shape entry", n) for n in mandelbrot_shape)
    if len(shape) != 2:
        raise ValueError(f"mandelbrot_shape must be (rows, columns), got {mandelbrot_shape!r}")
    if not cnn_image_px >= 4 or cnn_image_px % 4:
        raise ValueError(f"cnn_image_px must be a multiple of 4 (two 2x2 poolings), got {cnn_image_px!r}")
    p = PrimerParams(
        size=size, device=dev, vector_sizes=sizes, saxpy_a=float(saxpy_a),
        repeats=_int_at_least("repeats", repeats), warmup=_int_at_least("warmup", warmup, 0),
        mandelbrot_shape=shape,  # type: ignore[arg-type]
        mandelbrot_max_iter=_int_at_least("mandelbrot_max_iter", mandelbrot_max_iter),
        cnn_image_px=int(cnn_image_px), cnn_batch=_int_at_least("cnn_batch", cnn_batch),
        cnn_train_steps=_int_at_least("cnn_train_steps", cnn_train_steps), seed=int(seed),
    )
    if size == "smoke":
        p.vector_sizes = [n for n in sizes if n <= max(SMOKE["vector_sizes"])] or list(SMOKE["vector_sizes"])
        p.mandelbrot_shape = tuple(min(a, b) for a, b in zip(shape, SMOKE["mandelbrot_shape"]))
        for key in ("repeats", "warmup", "cnn_image_px", "cnn_train_steps"):
            setattr(p, key, min(getattr(p, key), SMOKE[key]))
    p.devices = devices_for(dev)
    return p


def devices_for(device: str) -> list[str]:
    """Devices a CPU-vs-GPU comparison runs on: ``["cpu"]`` or ``["cpu", device]``."""
    return ["cpu"] if not timing.is_cuda_device(device) else ["cpu", timing.device_name(device)]


# ----------------------------------------------------------------------------------------------
# kernels


@wp.kernel
def _noop(
    # Out:
    x_out: wp.array(dtype=float),
):
    # an empty kernel: its launch time is the floor under every other kernel's
    i = wp.tid()  # noqa: F841


@wp.kernel
def _vec_add(
    # In:
    a_in: wp.array(dtype=float),
    b_in: wp.array(dtype=float),
    # Out:
    c_out: wp.array(dtype=float),
):
    i = wp.tid()
    c_out[i] = a_in[i] + b_in[i]


@wp.kernel
def _saxpy(
    # In:
    a: float,
    x_in: wp.array(dtype=float),
    # Data in and out (read, then written):
    y_out: wp.array(dtype=float),
):
    i = wp.tid()
    y_out[i] = a * x_in[i] + y_out[i]


# its own Warp module, so its cold compile time is its own
@wp.kernel(module="unique")
def _mandelbrot(
    # In:
    x0: float,
    y0: float,
    step: float,
    max_iter: int,
    # Out:
    count_out: wp.array2d(dtype=wp.int32),
):
    row, col = wp.tid()
    cx = x0 + float(col) * step
    cy = y0 + float(row) * step
    x = float(0.0)
    y = float(0.0)
    n = int(0)
    while n < max_iter:
        xx = x * x
        yy = y * y
        if xx + yy > 4.0:
            break
        y = 2.0 * x * y + cy
        x = xx - yy + cx
        n += 1
    count_out[row, col] = n


def vector_add(a: wp.array, b: wp.array, c: wp.array) -> None:
    """``c = a + b`` (float32 Warp arrays of one length, on one device)."""
    wp.launch(_vec_add, dim=a.shape[0], inputs=[a, b], outputs=[c], device=a.device)


def saxpy(a: float, x: wp.array, y: wp.array) -> None:
    """``y = a*x + y`` in place (float32 Warp arrays of one length, on one device)."""
    wp.launch(_saxpy, dim=x.shape[0], inputs=[float(a), x], outputs=[y], device=x.device)


# ----------------------------------------------------------------------------------------------
# vector addition and SAXPY


def check_vector_kernels(device: str, n: int = 1000, a: float = 2.0, seed: int = 0) -> dict[str, Any]:
    """Run vector addition and SAXPY once on ``device`` and compare with numpy.

    Also runs the article's example, ``[1..6] + [7..12]``.

    Returns:
        ``{"device", "article_example": list, "vec_add_max_abs_err", "saxpy_max_abs_err", "ok"}``.
    """
    wp.init()
    a_np = np.arange(1, 7, dtype=np.float32)
    b_np = np.arange(7, 13, dtype=np.float32)
    c = wp.zeros(6, dtype=float, device=device)
    vector_add(wp.array(a_np, device=device), wp.array(b_np, device=device), c)
    example = c.numpy()

    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal(n).astype(np.float32)
    y_np = rng.standard_normal(n).astype(np.float32)
    x, y, out = (wp.array(v, device=device) for v in (x_np, y_np, np.zeros(n, np.float32)))
    vector_add(x, y, out)
    err_add = float(np.max(np.abs(out.numpy() - (x_np + y_np))))
    saxpy(a, x, y)
    want = np.float32(a) * x_np + y_np
    err_saxpy = float(np.max(np.abs(y.numpy() - want)))
    tol = 1e-5 * float(np.max(np.abs(want)))  # a fused multiply-add may round once instead of twice
    ok = bool(np.array_equal(example, a_np + b_np) and err_add == 0.0 and err_saxpy <= tol)
    return {"device": device, "article_example": example.tolist(), "vec_add_max_abs_err": err_add,
            "saxpy_max_abs_err": err_saxpy, "ok": ok}


#: bytes moved per element (float32): copy reads 1 and writes 1, add reads 2 writes 1,
#: saxpy reads x and y and writes y; an empty kernel moves nothing
BYTES_PER_ELEMENT = {"copy": 8, "vec_add": 12, "saxpy": 12, "empty_kernel": 0,
                      "numpy_copy": 8, "numpy_add": 12, "numpy_saxpy": 12}


def vector_sweep(sizes: Sequence[int], devices: Sequence[str], *, repeats: int = 20, warmup: int = 3,
                 a: float = 2.0, include_numpy: bool = True) -> pd.DataFrame:
    """Time copy, vector addition, SAXPY and an empty kernel over ``sizes`` on each device.

    Every timed call is one launch followed by a synchronise (:func:`fightlab.timing.measure`), so
    at tiny sizes the time is the launch-and-wait floor (compare ``empty_kernel``) and at large
    sizes it is memory traffic. Effective bandwidth = bytes read + written / median time;
    ``frac_of_copy`` divides it by the copy's bandwidth at the same size on the same device,
    measured in the same run. ``include_numpy`` adds numpy's copy (``np.copyto``), ``np.add(out=)``
    and SAXPY (two passes: ``z = a*x``, ``y += z``, so 12 bytes per element is a lower bound) on
    the CPU as a reference, as device ``"numpy"``.

    Returns:
        One row per (device, op, n): ``device, op, n, bytes, median_s, min_s, iqr_s,
        first_s, gb_per_s, frac_of_copy``.
    """
    wp.init()
    rows = []
    for dev in devices:
        for where in [dev] + (["numpy"] if include_numpy and dev == "cpu" else []):
            for n in sizes:
                for op, fn in _sweep_ops(where, n, a).items():
                    t = timing.measure(fn, device=dev, warmup=warmup, repeats=repeats, name=f"{op} n={n}")
                    rows.append(_sweep_row(where, op, n, t))
    df = pd.DataFrame(rows)
    copy_bw = df[df.op.isin(["copy", "numpy_copy"])].set_index(["device", "n"])["gb_per_s"]
    df["frac_of_copy"] = [
        r.gb_per_s / copy_bw.get((r.device, r.n), math.nan) if r.bytes else math.nan for r in df.itertuples()
    ]
    return df


def _sweep_ops(where: str, n: int, a: float) -> dict[str, Any]:
    """The timed calls of :func:`vector_sweep` at ``n`` float32 elements on device ``where``
    (``"numpy"``: numpy's on the CPU); ``wp.copy`` is a device-to-device memcpy on a GPU."""
    if where == "numpy":
        xn, yn, zn = np.ones(n, np.float32), np.full(n, 2.0, np.float32), np.zeros(n, np.float32)
        af = np.float32(a)
        return {"numpy_copy": lambda: np.copyto(zn, xn), "numpy_add": lambda: np.add(xn, yn, out=zn),
                "numpy_saxpy": lambda: (np.multiply(xn, af, out=zn), np.add(zn, yn, out=yn))}
    x, y = wp.full(n, 1.0, dtype=float, device=where), wp.full(n, 2.0, dtype=float, device=where)
    z = wp.zeros(n, dtype=float, device=where)
    return {"copy": lambda: wp.copy(z, x), "vec_add": lambda: vector_add(x, y, z),
            "saxpy": lambda: saxpy(a, x, y),
            "empty_kernel": lambda: wp.launch(_noop, dim=n, inputs=[], outputs=[z], device=where)}


def _sweep_row(dev: str, op: str, n: int, t: timing.Timing) -> dict[str, Any]:
    nbytes = BYTES_PER_ELEMENT[op] * n
    return {"device": dev, "op": op, "n": n, "bytes": nbytes, "median_s": t.median_s, "min_s": t.min_s,
            "iqr_s": t.iqr_s, "first_s": t.first_s,
            "gb_per_s": nbytes / t.median_s / 1e9 if nbytes and t.median_s > 0 else math.nan}


# ----------------------------------------------------------------------------------------------
# Mandelbrot


def mandelbrot_grid(shape: Sequence[int]) -> tuple[float, float, float]:
    """``(x0, y0, step)`` so pixel (row, col) is ``(x0 + col*step, y0 + row*step)`` in the window."""
    rows, cols = shape
    xmin, xmax, ymin, ymax = MANDELBROT_WINDOW
    step = min((xmax - xmin) / cols, (ymax - ymin) / rows)
    return xmin, ymin, step


def mandelbrot_numpy(shape: Sequence[int] = (1024, 1536), max_iter: int = 20) -> np.ndarray:
    """Iteration counts ``int32 [rows, cols]`` in vectorised numpy, float32 like the kernel.

    Same arithmetic, in the same order, as the Warp kernel: stop when ``x² + y² > 4``, else
    ``y = 2xy + cy``, ``x = x² - y² + cx`` and count. Only the points still inside are iterated.
    """
    rows, cols = (int(s) for s in shape)
    x0, y0, step = mandelbrot_grid(shape)
    f = np.float32
    cx = (f(x0) + np.arange(cols, dtype=f) * f(step))[None, :].repeat(rows, 0).ravel()
    cy = (f(y0) + np.arange(rows, dtype=f) * f(step))[:, None].repeat(cols, 1).ravel()
    count = np.zeros(rows * cols, np.int32)
    idx = np.arange(rows * cols)
    x, y = np.zeros_like(cx), np.zeros_like(cy)
    two = f(2.0)
    for _ in range(max_iter):
        xx, yy = x * x, y * y
        inside = xx + yy <= f(4.0)
        if not inside.all():
            idx, x, y, xx, yy, cx, cy = (v[inside] for v in (idx, x, y, xx, yy, cx, cy))
        if idx.size == 0:
            break
        y = two * x * y + cy
        x = xx - yy + cx
        count[idx] += 1
    return count.reshape(rows, cols)


def _mandelbrot_launcher(shape: Sequence[int], max_iter: int, device: str):
    x0, y0, step = mandelbrot_grid(shape)
    out = wp.full(tuple(shape), -1, dtype=wp.int32, device=device)  # -1: never written

    def launch() -> None:
        wp.launch(_mandelbrot, dim=tuple(shape), inputs=[x0, y0, step, int(max_iter)], outputs=[out],
                  device=device)

    return launch, out


def mandelbrot_warp(shape: Sequence[int] = (1024, 1536), max_iter: int = 20, device: str = "cpu",
                    *, launch: bool = True) -> np.ndarray:
    """Iteration counts ``int32 [rows, cols]`` from the Warp kernel on ``device``.

    The output starts filled with -1. ``launch=False`` skips the launch, as the article's GPU
    code did: the image then stays -1 everywhere, which :func:`image_match` catches.
    """
    wp.init()
    fn, out = _mandelbrot_launcher(shape, max_iter, device)
    if launch:
        fn()
    return out.numpy()  # copies to the host, which waits for the kernel


def image_match(image: np.ndarray, reference: np.ndarray) -> float:
    """Fraction of pixels with the same iteration count (1.0: identical; 0.0: nothing matches)."""
    image, reference = np.asarray(image), np.asarray(reference)
    if image.shape != reference.shape:
        raise ValueError(f"image_match: shapes differ, {image.shape} vs {reference.shape}")
    return float(np.mean(image == reference))


def mandelbrot_study(shape: Sequence[int], max_iter: int, devices: Sequence[str], *, repeats: int = 10,
                     warmup: int = 2) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Time the Mandelbrot image in numpy and with the Warp kernel on each device.

    Per Warp device: cold compile in an empty kernel cache (``compile_s``), first launch
    (``first_s``), steady-state median synchronised (``steady_s``) and unsynchronised
    (``unsynced_s``, the wrong number), the mean of back-to-back launches on the device's own
    clock (``device_timer_s``: CUDA events on a GPU, so no host round trip per launch), the
    one-shot total a naive JIT timing reports (``cold_total_s`` = compile + first), the share of
    compile time in it (``compile_share``), and how many pixels match the numpy image
    (``image_match``, from an output that starts at -1). Also the article's bug, as a
    demonstration rather than a measurement: an image whose kernel was never launched stays at
    its -1 fill, so ``never_launched_match`` is 0 by construction; it shows what the
    ``image_match`` check catches.

    Returns:
        ``(table, images)``: one row per implementation (``"numpy"``, ``"warp cpu"``,
        ``"warp cuda:0"``); ``images`` maps the same names to the arrays.
    """
    wp.init()
    rows, images = [], {}
    tn = timing.measure(lambda: mandelbrot_numpy(shape, max_iter), device="cpu",
                        warmup=min(warmup, 1), repeats=max(1, min(repeats, 5)), name="mandelbrot numpy")
    ref = mandelbrot_numpy(shape, max_iter)
    images["numpy"] = ref
    rows.append({"impl": "numpy", "device": "cpu", "compile_s": math.nan, "first_s": tn.first_s,
                 "steady_s": tn.median_s, "unsynced_s": math.nan, "image_match": 1.0})
    for dev in devices:
        launch, out = _mandelbrot_launcher(shape, max_iter, dev)
        t = timing.measure_cold(launch, _mandelbrot, device=dev, warmup=warmup, repeats=repeats,
                                name=f"mandelbrot warp {dev}")
        img = out.numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", timing.UnsynchronizedTimingWarning)
            wrong = timing.measure(launch, device=dev, sync=False, warmup=warmup, repeats=repeats,
                                   name=f"mandelbrot warp {dev} unsynced")
        timing.default_sync(dev)()  # drain what the unsynchronised loop queued
        with timing.device_timer(dev) as dt:
            for _ in range(repeats):
                launch()
        never = mandelbrot_warp(shape, max_iter, dev, launch=False)
        name = f"warp {dev}"
        images[name] = img
        rows.append({"impl": name, "device": dev, "compile_s": t.compile_s, "first_s": t.first_s,
                     "steady_s": t.median_s, "unsynced_s": wrong.median_s,
                     "device_timer_s": dt.elapsed_s / repeats, "device_timer_method": dt.method,
                     "image_match": image_match(img, ref), "never_launched_match": image_match(never, ref)})
    df = pd.DataFrame(rows)
    df["cold_total_s"] = df.compile_s + df.first_s
    df["compile_share"] = df.compile_s / df.cold_total_s  # compile's share of compile + first
    df["speedup_vs_numpy"] = df.steady_s.iloc[0] / df.steady_s
    df["unsynced_speedup_vs_numpy"] = df.steady_s.iloc[0] / df.unsynced_s
    df["cold_speedup_vs_numpy"] = df.steady_s.iloc[0] / df.cold_total_s
    df.attrs["pixels"] = int(np.prod(shape))
    return df, images


# ----------------------------------------------------------------------------------------------
# closing table, prices, result row


def _at_n(sweep: pd.DataFrame, device: str, op: str, col: str, largest: bool = True) -> float:
    g = sweep[(sweep.device == device) & (sweep.op == op)].sort_values("n")
    return float(g.iloc[-1 if largest else 0][col]) if len(g) else math.nan


def summary(sweep: pd.DataFrame, mandel: pd.DataFrame, cnn: pd.DataFrame, gpu: str | None) -> dict[str, float]:
    """The run's headline numbers (the ``primer`` result row's metric columns, NaN if not measured)."""
    def m(impl: str, col: str) -> float:
        g = mandel[mandel.impl == impl]
        return float(g.iloc[0][col]) if len(g) and col in g else math.nan

    def c(dev: str, col: str) -> float:
        g = cnn[cnn.device == dev]
        return float(g.iloc[0][col]) if len(g) else math.nan

    g = gpu or "-"
    out = {"vector_n": float(sweep.n.max()),
           "numpy_saxpy_gb_per_s": _at_n(sweep, "numpy", "numpy_saxpy", "gb_per_s"),
           "mandelbrot_pixels": float(mandel.attrs.get("pixels", math.nan)),
           "mandelbrot_numpy_s": m("numpy", "steady_s"),
           "mandelbrot_unsynced_s_gpu": m(f"warp {g}", "unsynced_s"),
           "mandelbrot_image_match_gpu": m(f"warp {g}", "image_match"),
           "cnn_batch": c("cpu", "batch"), "cnn_image_px": c("cpu", "image_px"),
           "cnn_unsynced_step_s_gpu": c(g, "unsynced_step_s")}
    for side, dev in (("cpu", "cpu"), ("gpu", g)):
        for op in ("copy", "vec_add", "saxpy"):
            out[f"{op}_gb_per_s_{side}"] = _at_n(sweep, dev, op, "gb_per_s")
        out[f"empty_launch_us_{side}"] = _at_n(sweep, dev, "empty_kernel", "median_s", largest=False) * 1e6
        for col in ("compile_s", "first_s", "steady_s"):
            out[f"mandelbrot_{col}_{side}"] = m(f"warp {dev}", col)
        out[f"cnn_step_s_{side}"] = c(dev, "step_s")
        out[f"cnn_test_accuracy_{side}"] = c(dev, "test_accuracy")
    return {k: out[k] for k in PRIMER_METRICS}  # the row's column order


#: the ``primer`` experiment's metric columns (units in the names; GPU columns empty on a CPU run)
PRIMER_METRICS: tuple[str, ...] = results.EXPERIMENTS["primer"]


def ratios(s: dict[str, float]) -> pd.DataFrame:
    """The closing table: each quantity on the CPU, on the GPU, and GPU over CPU (or the honest way round).

    ``ratio`` is "how many times better the GPU is" (bandwidth GPU/CPU; time CPU/GPU), NaN and a
    note where no GPU ran.
    """
    def row(what: str, unit: str, cpu: float, gpu: float, higher_is_better: bool) -> dict[str, Any]:
        r = math.nan if math.isnan(gpu) else gpu / cpu if higher_is_better else cpu / gpu
        return {"quantity": what, "unit": unit, "cpu": cpu, "gpu": gpu, "gpu_advantage_x": r,
                "note": GPU_MISSING if math.isnan(gpu) else ""}

    ms = s["mandelbrot_steady_s_gpu"]
    rows = [
        row("copy bandwidth, largest n", "GB/s", s["copy_gb_per_s_cpu"], s["copy_gb_per_s_gpu"], True),
        row("vector addition bandwidth, largest n", "GB/s", s["vec_add_gb_per_s_cpu"],
            s["vec_add_gb_per_s_gpu"], True),
        row("SAXPY bandwidth, largest n", "GB/s", s["saxpy_gb_per_s_cpu"], s["saxpy_gb_per_s_gpu"], True),
        row("empty kernel, launch + wait", "us", s["empty_launch_us_cpu"], s["empty_launch_us_gpu"], False),
        row("Mandelbrot, steady state vs numpy", "s", s["mandelbrot_numpy_s"], ms, False),
        row("Mandelbrot, steady state vs Warp CPU", "s", s["mandelbrot_steady_s_cpu"], ms, False),
        row("Mandelbrot, UNSYNCHRONISED vs numpy (wrong)", "s", s["mandelbrot_numpy_s"],
            s["mandelbrot_unsynced_s_gpu"], False),
        row("Mandelbrot, cold (compile + first) vs numpy", "s", s["mandelbrot_numpy_s"],
            s["mandelbrot_compile_s_gpu"] + s["mandelbrot_first_s_gpu"], False),
        row("CNN training step", "s", s["cnn_step_s_cpu"], s["cnn_step_s_gpu"], False),
    ]
    return pd.DataFrame(rows)


def cloud_prices(path: Path | str = CLOUD_PRICES) -> pd.DataFrame:
    """The article's cloud prices with price per GPU-hour and the ratio to the cheapest offer."""
    df = pd.read_csv(path)
    df["usd_per_gpu_h"] = df.usd_per_h / df.gpus
    df["vs_cheapest_per_gpu_h_x"] = df.usd_per_gpu_h / df.usd_per_gpu_h.min()
    return df


def result_row(params: PrimerParams, s: dict[str, float]) -> dict[str, Any]:
    """The ``primer`` result row: :func:`fightlab.results.run_metadata` + the metrics of :func:`summary`.

    ``body`` is ``"none"`` and ``nworld`` 1 (the primer simulates no body); ``params`` holds the
    notebook's parameters; GPU columns are None on a CPU-only run.
    """
    meta = results.run_metadata(body="none", nworld=1, seed=params.seed, params=asdict(params),
                                device=params.device)
    metrics = {k: (None if s[k] is None or math.isnan(s[k]) else float(s[k])) for k in PRIMER_METRICS}
    return {**meta, **metrics}
