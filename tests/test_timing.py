"""fightlab.timing with a fake clock and a fake asynchronous device, plus one real Warp CPU kernel."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fightlab import timing
from fightlab.timing import Timing, UnsynchronizedTimingWarning, measure


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


class FakeDevice:
    """An asynchronous device: launches return at once, the work completes only on sync().

    ``launch(d)`` queues ``d`` seconds of work and costs ``launch_s`` of host time; ``sync()``
    advances the clock by all queued work. ``fail_on`` makes the n-th launch raise.
    """

    def __init__(self, clock: FakeClock, launch_s: float = 0.0, fail_on: int | None = None) -> None:
        self.clock = clock
        self.launch_s = launch_s
        self.pending = 0.0
        self.launches = 0
        self.syncs = 0
        self.fail_on = fail_on

    def launch(self, seconds: float) -> None:
        self.launches += 1
        if self.fail_on is not None and self.launches == self.fail_on:
            raise RuntimeError(f"fake device fault on launch {self.launches}")
        self.clock.advance(self.launch_s)
        self.pending += seconds

    def sync(self) -> None:
        self.syncs += 1
        self.clock.advance(self.pending)
        self.pending = 0.0


def test_with_sync_the_clock_sees_the_device_work():
    clock = FakeClock()
    dev = FakeDevice(clock)
    t = measure(lambda: dev.launch(0.010), device="cuda:0", sync=dev.sync, clock=clock, warmup=2, repeats=5)
    assert t.synchronized
    assert t.device == "cuda:0"
    assert t.times_s == pytest.approx([0.010] * 5)
    assert t.median_s == pytest.approx(0.010)
    assert t.first_s == pytest.approx(0.010)
    assert t.per(1000) == pytest.approx(1e-5)
    assert t.rate(1000) == pytest.approx(1e5)


def test_missing_sync_is_caught_and_flagged():
    clock = FakeClock()
    dev = FakeDevice(clock, launch_s=1e-6)
    with pytest.warns(UnsynchronizedTimingWarning, match="teach"):
        wrong = measure(lambda: dev.launch(0.010), device="cuda:0", sync=False, clock=clock, repeats=5)
    assert wrong.synchronized is False
    assert wrong.median_s == pytest.approx(1e-6)  # only the launch: ~0, not the 10 ms of work
    assert dev.syncs == 0
    assert "NOT SYNCHRONISED" in str(wrong)

    dev.sync()  # drain
    right = measure(lambda: dev.launch(0.010), device="cuda:0", sync=dev.sync, clock=clock, repeats=5)
    assert right.synchronized
    assert right.median_s == pytest.approx(0.010 + 1e-6)
    assert right.median_s > 1000 * wrong.median_s


def test_sync_before_start_keeps_queued_work_out_of_the_timed_region():
    clock = FakeClock()
    dev = FakeDevice(clock)
    dev.launch(5.0)  # work queued before the measurement starts
    t = measure(lambda: dev.launch(0.002), sync=dev.sync, clock=clock, warmup=0, repeats=3)
    assert t.first_s == pytest.approx(0.002)
    assert max(t.times_s) == pytest.approx(0.002)


def test_compare_sync_returns_right_and_wrong():
    clock = FakeClock()
    dev = FakeDevice(clock)
    # default sync for "cpu" is a no-op, so this fn waits for its own work
    right, wrong = timing.compare_sync(lambda: (dev.launch(0.01), dev.sync()), clock=clock, repeats=3)
    assert right.synchronized and not wrong.synchronized
    with pytest.raises(ValueError, match="sync"):
        timing.compare_sync(lambda: None, sync=False)


def test_compile_time_is_reported_apart():
    clock = FakeClock()
    dev = FakeDevice(clock)
    t = measure(
        lambda: dev.launch(0.001),
        compile=lambda: clock.advance(3.0),
        sync=dev.sync,
        clock=clock,
        warmup=1,
        repeats=4,
    )
    assert t.compile_s == pytest.approx(3.0)
    assert t.first_s == pytest.approx(0.001)
    assert t.median_s == pytest.approx(0.001)
    no_compile = measure(lambda: dev.launch(0.001), sync=dev.sync, clock=clock, repeats=1, warmup=0)
    assert no_compile.compile_s is None


def test_median_ignores_a_slow_first_call_and_one_outlier():
    clock = FakeClock()
    dev = FakeDevice(clock)
    durations = iter([0.1] + [0.001] * 3 + [0.001, 0.001, 0.05, 0.001, 0.001])  # first 100x slower
    t = measure(lambda: dev.launch(next(durations)), sync=dev.sync, clock=clock, warmup=3, repeats=5)
    assert t.first_s == pytest.approx(0.1)
    assert t.median_s == pytest.approx(0.001)
    assert t.min_s == pytest.approx(0.001)
    assert t.iqr_s == pytest.approx(0.0)
    assert max(t.times_s) == pytest.approx(0.05)


def test_counts_are_honoured():
    clock = FakeClock()
    dev = FakeDevice(clock)
    t = measure(lambda: dev.launch(0.001), sync=dev.sync, clock=clock, warmup=4, repeats=7)
    assert dev.launches == 1 + 4 + 7
    assert (t.warmup, t.repeats, len(t.times_s)) == (4, 7, 7)
    dev2 = FakeDevice(clock)
    t = measure(lambda: dev2.launch(0.001), sync=dev2.sync, clock=clock, warmup=0, repeats=1)
    assert dev2.launches == 2 and t.iqr_s == 0.0


def test_iqr():
    clock = FakeClock()
    dev = FakeDevice(clock)
    durations = iter([1.0] + [1.0, 2.0, 3.0, 4.0, 5.0])
    t = measure(lambda: dev.launch(next(durations)), sync=dev.sync, clock=clock, warmup=0, repeats=5)
    assert t.median_s == pytest.approx(3.0)
    assert t.iqr_s == pytest.approx(2.0)  # 4 - 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"repeats": 0}, "repeats.*0"),
        ({"repeats": -3}, "repeats.*-3"),
        ({"repeats": 2.5}, "repeats.*2.5"),
        ({"warmup": -1}, "warmup.*-1"),
        ({"sync": "yes"}, "sync.*'yes'"),
    ],
)
def test_bad_arguments_raise_naming_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        measure(lambda: None, **kwargs)


def test_per_rejects_non_positive():
    t = measure(lambda: None, repeats=1, warmup=0)
    with pytest.raises(ValueError, match="0"):
        t.per(0)


def test_a_failing_device_propagates_its_error():
    clock = FakeClock()
    dev = FakeDevice(clock, fail_on=3)
    with pytest.raises(RuntimeError, match="launch 3"):
        measure(lambda: dev.launch(0.001), sync=dev.sync, clock=clock, warmup=2, repeats=2)


def test_device_names_and_default_sync_on_cpu():
    assert timing.device_name(None) == "cpu"
    assert timing.device_name("cuda:1") == "cuda:1"
    assert timing.is_cuda_device("cuda") and not timing.is_cuda_device("cpu")
    torch = pytest.importorskip("torch")
    assert timing.device_name(torch.device("cpu")) == "cpu"
    assert timing.default_sync("cpu")() is None


def test_device_timer_host_clock_on_cpu():
    clock = FakeClock()
    dev = FakeDevice(clock)
    with timing.device_timer("cpu", sync=dev.sync, clock=clock) as t:
        dev.launch(0.25)
    assert t.method == "host-clock"
    assert t.elapsed_s == pytest.approx(0.25)


def test_timing_str_and_dict():
    t = Timing("x", "cpu", None, 0.5, [0.001], 0.001, 0.001, 0.0, 1, 0, True)
    assert "median 1.000 ms" in str(t)
    assert t.as_dict()["times_s"] == [0.001]


# ---------------------------------------------------------------------------------------------
# real Warp, CPU

wp = pytest.importorskip("warp")


@wp.kernel
def _axpy(a: float, x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


def test_real_warp_cpu_kernel():
    wp.init()
    n = 64
    x = wp.array(np.ones(n, dtype=np.float32), device="cpu")
    y = wp.zeros(n, dtype=float, device="cpu")

    def step():
        wp.launch(_axpy, dim=n, inputs=[2.0, x, y], device="cpu")

    t = measure(step, device="cpu", warmup=1, repeats=3, name="axpy")
    assert t.synchronized and t.repeats == 3
    assert all(s >= 0 for s in t.times_s)
    assert t.min_s <= t.median_s
    np.testing.assert_allclose(y.numpy(), 2.0 * (1 + 1 + 3))


def test_real_warp_cold_compile_time(tmp_path):
    wp.init()
    saved = wp.config.kernel_cache_dir
    cold = tmp_path / "cold"
    s = timing.compile_time(_axpy, device="cpu", kernel_cache_dir=cold)
    assert s > 0
    assert wp.config.kernel_cache_dir == saved  # restored
    assert any(p.name.startswith("wp_") for p in cold.iterdir())  # compiled into the cold cache
    assert os.path.isdir(saved)
    # still launches afterwards (from the real cache)
    y = wp.zeros(4, dtype=float, device="cpu")
    wp.launch(_axpy, dim=4, inputs=[1.0, wp.ones(4, dtype=float, device="cpu"), y], device="cpu")
    np.testing.assert_allclose(y.numpy(), 1.0)
    with pytest.raises(ValueError, match="already holds"):
        timing.compile_time(_axpy, kernel_cache_dir=cold)  # not cold any more
    with pytest.raises(ValueError, match="no_such_module"):
        timing.compile_time("no_such_module_xyz")


@pytest.mark.gpu
def test_real_warp_cuda_events_and_sync():
    wp.init()
    if not wp.is_cuda_available():
        pytest.skip("needs a CUDA device")
    # 2**26 floats (256 MB an array): each launch moves ~0.8 GB, ~0.2 ms at an H200's 4.8 TB/s,
    # ten times its launch cost; at 2**20 a fast card's work took no longer than the launches
    n = 1 << 26
    x = wp.ones(n, dtype=float, device="cuda:0")
    y = wp.zeros(n, dtype=float, device="cuda:0")

    def step():
        for _ in range(20):
            wp.launch(_axpy, dim=n, inputs=[1.0, x, y], device="cuda:0")

    right = measure(step, device="cuda:0", warmup=2, repeats=5)
    assert right.synchronized and right.median_s > 0
    with timing.device_timer("cuda:0") as t:
        step()
    assert t.method == "cuda-event" and t.elapsed_s > 0
    # the synchronised host clock and the device's own events time the same work alike (units
    # included: a factor-1000 slip fails here) ...
    assert 0.5 < right.median_s / t.elapsed_s < 2.0, (right.median_s, t.elapsed_s)
    # ... and the unsynchronised number is the launch cost only, far below the work
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrong = measure(step, device="cuda:0", warmup=2, repeats=5, sync=False)
    wp.synchronize_device("cuda:0")
    assert wrong.median_s < 0.5 * right.median_s, (wrong.median_s, right.median_s)
    assert timing.compile_time(_axpy, device="cuda:0") > 0


# ---------------------------------------------------------------------------------------------
# device choice, refusing unsynchronised numbers, cold starts (fake clock and fake device)


def test_resolve_device_auto_and_explicit():
    yes, no = (lambda: True), (lambda: False)
    assert timing.resolve_device("auto", has_cuda=no) == "cpu"
    assert timing.resolve_device("auto", has_cuda=yes) == "cuda:0"
    assert timing.resolve_device(None, has_cuda=yes) == "cuda:0"
    assert timing.resolve_device("cpu", has_cuda=yes) == "cpu"
    assert timing.resolve_device("cuda", has_cuda=yes) == "cuda:0"
    assert timing.resolve_device("cuda:1", has_cuda=yes) == "cuda:1"
    with pytest.raises(ValueError, match="'auto', 'cpu'.*got 'gpu'"):
        timing.resolve_device("gpu", has_cuda=yes)
    with pytest.raises(ValueError, match="'cuda:0'.*has none"):
        timing.resolve_device("cuda:0", has_cuda=no)


def test_resolve_device_on_this_machine():
    dev = timing.resolve_device("auto")
    assert dev == ("cuda:0" if timing.cuda_available() else "cpu")


def test_default_sync_on_a_gpu_device_catches_the_missing_sync(monkeypatch):
    """With sync=None a CUDA device gets its device sync: the queued work lands in the timing."""
    clock = FakeClock()
    dev = FakeDevice(clock, launch_s=1e-6)
    monkeypatch.setattr(timing, "default_sync", lambda device: dev.sync)
    t = measure(lambda: dev.launch(0.004), device="cuda:0", clock=clock, warmup=1, repeats=3)
    assert t.synchronized and dev.syncs > 0
    assert t.median_s == pytest.approx(0.004 + 1e-6)


def test_real_default_sync_for_cuda_waits_for_warp_and_torch(monkeypatch):
    """The real default_sync (not a fake) calls warp's device sync and torch's CUDA sync."""
    import torch

    calls = []
    monkeypatch.setattr(wp, "synchronize_device", lambda d: calls.append(("warp", str(d))))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: calls.append(("torch", str(d))))
    timing.default_sync("cuda:0")()
    assert calls == [("warp", "cuda:0"), ("torch", "cuda:0")]
    calls.clear()
    timing.default_sync("cpu")()
    assert calls == []


def test_require_synchronized_refuses_the_wrong_number():
    clock = FakeClock()
    dev = FakeDevice(clock, launch_s=1e-6)
    right = measure(lambda: dev.launch(0.01), device="cuda:0", sync=dev.sync, clock=clock, repeats=3,
                    name="step")
    with pytest.warns(UnsynchronizedTimingWarning):
        wrong = measure(lambda: dev.launch(0.01), device="cuda:0", sync=False, clock=clock, repeats=3,
                        name="step")
    timing.require_synchronized(right)  # passes
    with pytest.raises(ValueError, match="'step' on cuda:0.*without synchronising"):
        timing.require_synchronized(right, wrong)
    with pytest.raises(TypeError, match="float"):
        timing.require_synchronized(0.1)
    # the unsynchronised number is the launch alone: 10000x too small here
    assert right.median_s / wrong.median_s > 1000


def test_median_ignores_slow_warmup_calls():
    clock = FakeClock()
    dev = FakeDevice(clock)
    # first call 0.5 s, three warm-up calls 0.2 s (caches, allocator, clocks ramping), then steady
    durations = iter([0.5, 0.2, 0.2, 0.2] + [0.002] * 6)
    t = measure(lambda: dev.launch(next(durations)), sync=dev.sync, clock=clock, warmup=3, repeats=6)
    assert t.first_s == pytest.approx(0.5)
    assert t.times_s == pytest.approx([0.002] * 6)
    assert t.median_s == pytest.approx(0.002)


def test_measure_cold_reports_compile_first_and_steady_apart():
    clock = FakeClock()
    dev = FakeDevice(clock)
    seen = {}

    def fake_compile(module, *, device, kernel_cache_dir, clock):
        seen.update(module=module, device=device, cache=kernel_cache_dir)
        clock.advance(2.5)  # the compiler's time
        return 2.5

    durations = iter([0.050] + [0.001] * 5)  # first launch: loading the module from the cache
    t = timing.measure_cold(lambda: dev.launch(next(durations)), "my_module", device="cuda:0",
                            kernel_cache_dir="/tmp/cold", clock=clock, compile_timer=fake_compile,
                            sync=dev.sync, warmup=1, repeats=4, name="k")
    assert seen == {"module": "my_module", "device": "cuda:0", "cache": "/tmp/cold"}
    assert t.compile_s == pytest.approx(2.5)
    assert t.first_s == pytest.approx(0.050)
    assert t.median_s == pytest.approx(0.001)
    assert "compile 2.500 s" in str(t)
    with pytest.raises(ValueError, match="compile"):
        timing.measure_cold(lambda: None, "m", compile=lambda: None, compile_timer=fake_compile)


def test_real_warp_cold_compile_builds_what_a_cpu_launch_uses(tmp_path):
    """compile_time must build the block size a CPU wp.launch loads (1), else it compiles twice."""
    wp.init()
    cold = tmp_path / "cold"
    timing.compile_time(_axpy, device="cpu", kernel_cache_dir=cold)
    built = {p.name for p in cold.iterdir()}
    assert _axpy.module.get_module_identifier(1) in built


def test_sync_debug_mode_hides_only_torchs_prototype_note(monkeypatch):
    """The mode is set (the check kept); torch's one-time "prototype feature" note is dropped,
    any other warning of the call still reaches the user."""
    import warnings

    import torch

    from fightlab.timing import SYNC_DEBUG_NOTE, set_sync_debug_mode

    modes = []

    def fake(mode):  # torch's C++ TORCH_WARN_ONCE arrives as a Python UserWarning
        modes.append(mode)
        warnings.warn(SYNC_DEBUG_NOTE + " and does not yet detect all synchronizing operations")
        warnings.warn("something else")

    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", fake)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        set_sync_debug_mode("error")
        set_sync_debug_mode(0)
    assert modes == ["error", 0]
    assert [str(w.message) for w in seen] == ["something else", "something else"]
