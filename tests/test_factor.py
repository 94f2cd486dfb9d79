"""fightlab.kernels.factor on warp's CPU device: the single-launch tree LDL vs the stock sparse path.

"Within float32 rounding" is judged against the rounding the stock path itself makes: both are
compared with a float64 factorization of the same float32 ``M`` (``reference_factor``); the
custom-vs-stock difference must not exceed a small multiple of those errors, and the custom
result must be no farther from float64 than (a small multiple of) the stock one.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src import smooth
from mujoco_warp._src import types as mjw_types

from fightlab import bodies
from fightlab.kernels import factor as K
from fightlab.measure import factor as F
from fightlab.sim import physics

SLOTS = physics.slots_for("muscular-fast")


@pytest.fixture(scope="module")
def humanoid():
    return bodies.build("muscular-fast")


def _check_close(e: dict, name: str) -> None:
    for key in ("qld", "qldiaginv"):
        stock, tree = e[f"{key}_rel_err_stock_f64"], e[f"{key}_rel_err_tree_f64"]
        # custom vs stock is no larger than a few times stock's own float32 rounding error
        # (against float64), and custom is no farther from float64 than stock
        assert e[f"{key}_rel_err"] <= 3.0 * stock + 1e-6, (name, key, e)
        assert tree <= 2.0 * stock + 1e-6, (name, key, e)
    print(f"{name}: qLD rel err {e['qld_rel_err']:.2e} (stock vs f64 {e['qld_rel_err_stock_f64']:.2e}),"
          f" qLDiagInv rel err {e['qldiaginv_rel_err']:.2e}")


def test_humanoid_factor_matches_stock(humanoid, cpu_blocks):
    e = F.factor_errors(humanoid, nworld=3, seed=0)
    assert humanoid.nv == 89 and e["nlevel"] == 24
    assert e["qld_rel_err"] < 5e-6 and e["qldiaginv_rel_err"] < 5e-6, e
    _check_close(e, "muscular-fast")


@pytest.mark.parametrize("kind,ndof,seed", [("chain", 70, 0), ("chain", 120, 1), ("tree", 90, 2),
                                            ("tree", 110, 3)])
def test_large_trees_match_stock(kind, ndof, seed, cpu_blocks):
    mjm = F.chain_model(ndof, seed=seed) if kind == "chain" else \
        F.random_tree_model(ndof, nbranch=5, seed=seed)
    assert mjm.nv > mjw_types.M_BLOCK_DENSE_MAX
    _check_close(F.factor_errors(mjm, nworld=2, seed=seed), f"{kind}-{mjm.nv}")


@pytest.mark.parametrize("ndof,dense", [(30, 16), (60, 8)])
def test_small_trees_on_sparse_path(ndof, dense, cpu_blocks):
    mjm = F.random_tree_model(ndof, nbranch=3, seed=ndof)
    before = mjw_types.M_BLOCK_DENSE_MAX
    with K.dense_max(dense):
        assert mjw_types.M_BLOCK_DENSE_MAX == dense
        _check_close(F.factor_errors(mjm, nworld=2), f"tree-{mjm.nv} (dense max {dense})")
    assert mjw_types.M_BLOCK_DENSE_MAX == before


def test_mixed_model_layout_and_block_dims(cpu_blocks):
    """A sparse tree next to small dense/compact trees: the view at qLD_block_total and qLDiagInv
    of every DOF match stock; the result is bitwise the same for any block_dim (no atomics)."""
    mjm = F.chain_model(70, seed=5, extra_chains=(3, 10))
    m, d = F.put(mjm, 2, "cpu")
    assert m.qLD_block_total > 0 and m.qLD_updates
    q, v = F.random_state(mjm, 2, np.random.default_rng(0))
    F.set_state(d, q, v)
    mjw.fwd_position(m, d, factorize=False)
    off = m.qLD_block_total
    qLD_s, D_s = wp.zeros_like(d.qLD), wp.zeros_like(d.qLDiagInv)
    smooth._factor_blocks(m, d, d.M, qLD_s, D_s)
    K.stock_factor(m, d, d.M, qLD_s[:, off:], D_s)
    out = []
    for bd in (1, 7, 64):
        qLD, D = wp.zeros_like(d.qLD), wp.zeros_like(d.qLDiagInv)
        smooth._factor_blocks(m, d, d.M, qLD, D)
        K.factor_tree(m, d, d.M, qLD[:, off:], D, block_dim=bd)
        out.append((qLD.numpy(), D.numpy()))
    assert all(np.array_equal(out[0][0], o[0]) and np.array_equal(out[0][1], o[1]) for o in out)
    assert np.array_equal(out[0][0][:, :off], qLD_s.numpy()[:, :off])  # dense blocks untouched
    L_ref, D_ref = F.reference_factor(m, d.M.numpy())
    for x, stock, ref in ((out[0][0][:, off:], qLD_s.numpy()[:, off:], L_ref),
                          (out[0][1], D_s.numpy(), D_ref)):
        rounding = F.relative_error(stock, ref) + F.relative_error(x, ref) + 1e-7
        assert F.relative_error(x, stock) <= 2.0 * rounding


@pytest.mark.parametrize("name", ["muscular-fast", "chain-120", "tree-110"])
@pytest.mark.parametrize("blocks", [False, True])
def test_shared_variant_is_bitwise_the_global_one(name, blocks, monkeypatch):
    """Same operations in the same order: staging in shared memory and computing each update's
    scale factor once (phase S) must not change a single bit, for any block size."""
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", blocks)
    mjm, _ = F.model_for(name) if name != "tree-110" else (F.random_tree_model(110, nbranch=5, seed=3), {})
    m, d = F.put(mjm, 2, "cpu")
    q, v = F.random_state(mjm, 2, np.random.default_rng(1))
    F.set_state(d, q, v)
    mjw.fwd_position(m, d, factorize=False)
    s = K.build_schedule(m)
    assert K.resolve_variant(s, "auto") == "shared"
    out = {}
    for variant, bd in (("global", 64), ("shared", 64), ("shared", 128), ("shared", 7)):
        L, D = wp.zeros((2, m.nC), float), wp.zeros((2, m.nv), float)
        K.factor_tree(m, d, d.M, L, D, schedule=s, block_dim=bd, variant=variant)
        out[(variant, bd)] = (L.numpy(), D.numpy())
    ref = out[("global", 64)]
    assert np.isfinite(ref[0]).all() and np.abs(ref[0]).max() > 0
    for key, (L, D) in out.items():
        assert np.array_equal(L, ref[0]) and np.array_equal(D, ref[1]), key


@pytest.mark.parametrize("variant", ["shared", "global"])
def test_factor_tree_reads_nothing_back_from_the_device(variant, monkeypatch):
    """factor_tree runs inside the env's captured CUDA graph: with its schedule built, a launch
    must not copy anything to the host (a device read would fail in a capture)."""
    m, d = F.put(F.chain_model(70, seed=4), 1, "cpu")
    mjw.fwd_position(m, d, factorize=False)
    s = K.build_schedule(m)
    L, D = wp.zeros((1, m.nC), float), wp.zeros((1, m.nv), float)
    K.factor_tree(m, d, d.M, L, D, schedule=s, variant=variant)  # first call: scratch, compile

    reads = []

    def no_read(self, *a, **k):
        reads.append(self.shape)
        raise AssertionError("device array read back during factor_tree")

    monkeypatch.setattr(wp.array, "numpy", no_read)
    K.factor_tree(m, d, d.M, L, D, schedule=s, variant=variant)
    # what a launch consults on the host: the capacity and the variant, from the schedule alone
    assert K.shared_capacity(s) > 0 and K.resolve_variant(s, "auto") in ("shared", "global")
    assert reads == []


def test_variant_choice_and_errors(monkeypatch):
    mjm = F.chain_model(70, seed=2)
    m, d = F.put(mjm, 1, "cpu")
    mjw.fwd_position(m, d, factorize=False)
    s = K.build_schedule(m)
    cap = K.shared_capacity(s)
    nu_max = int(np.max(np.diff(s.upd_off.numpy())))
    # L, the partial sums and one scale factor per update of the largest level, rounded up
    assert cap % K.SHARED_ROUND == 0 and s.nC + s.np_max + nu_max <= cap < s.nC + s.np_max + nu_max + K.SHARED_ROUND
    monkeypatch.setattr(K, "SHARED_MAX", cap)  # exactly fits
    assert K.resolve_variant(s, "auto") == "shared" and K.resolve_variant(s, "shared") == "shared"
    with pytest.raises(ValueError, match="variant must be one of"):
        K.resolve_variant(s, "fast")
    with pytest.raises(ValueError, match="variant must be one of"):
        K.use_tree_factor(m, variant="fast")
    monkeypatch.setattr(K, "SHARED_MAX", cap - 1)  # the tree no longer fits
    assert K.resolve_variant(s, "auto") == "global"
    with pytest.raises(ValueError, match="SHARED_MAX"):
        K.resolve_variant(s, "shared")
    with pytest.raises(ValueError, match="SHARED_MAX"):
        K.use_tree_factor(m, variant="shared")
    assert not K.is_tree_factor_enabled(m)
    # auto falls back to the global kernel and still factors correctly
    L, D = wp.zeros((1, m.nC), float), wp.zeros((1, m.nv), float)
    L_s, D_s = wp.zeros((1, m.nC), float), wp.zeros((1, m.nv), float)
    K.factor_tree(m, d, d.M, L, D, schedule=s)
    K.stock_factor(m, d, d.M, L_s, D_s)
    _, D_ref = F.reference_factor(m, d.M.numpy())
    rounding = F.relative_error(D_s.numpy(), D_ref)
    assert np.isfinite(D_ref).all() and 0 < rounding < 1e-2
    assert F.relative_error(D.numpy(), D_s.numpy()) <= 3.0 * rounding + 1e-6


def test_kernels_compile_for_the_gpu(tmp_path):
    """The CUDA build of both variants (sm_90, the H200's) compiles with Warp's NVRTC, so a GPU
    session cannot fail on a CUDA-only compile error. Skipped where Warp has no NVRTC."""
    from warp._src import context

    wp.init()
    if not getattr(context.runtime.core, "wp_cuda_compile_program", None):
        pytest.skip("this Warp build cannot compile CUDA")
    m, _ = F.put(bodies.build("muscular-fast"), 1, "cpu")
    cap = K.shared_capacity(K.build_schedule(m))
    for kernel in K.variant_kernels(cap).values():
        files = wp.compile_aot_module(kernel.module, device=None, arch=90, module_dir=tmp_path)
        assert files and all(f.stat().st_size > 0 for f in files)


def test_switch_is_explicit_reversible_and_per_model():
    mjm = F.chain_model(70, seed=1)
    m1, d1 = F.put(mjm, 1, "cpu")
    m2, d2 = F.put(mjm, 1, "cpu")
    import gc

    gc.collect()  # models of earlier tests (envs with the factor on) are gone: their entries too
    original = smooth._factor_i_sparse
    assert original is K.stock_factor, "switched on at import (or left on by a dead model)"
    assert K.use_tree_factor(m1) is True
    assert smooth._factor_i_sparse is not original
    assert K.is_tree_factor_enabled(m1) and not K.is_tree_factor_enabled(m2)
    assert K.count_factor_calls(m1, d1) == {"tree": 2, "stock": 0}
    assert K.count_factor_calls(m2, d2) == {"tree": 0, "stock": 2}
    K.disable_tree_factor(m1)
    assert smooth._factor_i_sparse is original and not K.is_tree_factor_enabled(m1)
    with pytest.raises(RuntimeError, match="boom"):
        with K.tree_factor(m2) as on:
            assert on and K.is_tree_factor_enabled(m2)
            with K.tree_factor(m2):  # nested: the outer state survives the inner exit
                pass
            assert K.is_tree_factor_enabled(m2)
            raise RuntimeError("boom")
    assert smooth._factor_i_sparse is original and not K.is_tree_factor_enabled(m2)
    # a model without a tree over M_BLOCK_DENSE_MAX: nothing to replace, nothing patched
    small, _ = F.put(F.chain_model(10), 1, "cpu")
    assert K.use_tree_factor(small) is False and smooth._factor_i_sparse is original
    with pytest.raises(ValueError, match="block_dim"):
        K.use_tree_factor(m1, block_dim=0)


def test_one_step_agrees_and_covers_every_factorization(humanoid):
    """Our settings (Euler, eulerdamp, damping, Newton): 2 factorizations per step, both custom."""
    assert humanoid.opt.integrator == 0 and humanoid.opt.solver == 2  # Euler, Newton
    assert humanoid.dof_damping.max() > 0 and not humanoid.opt.disableflags
    e = F.step_qacc_error(humanoid, nworld=2, seed=3, nconmax=SLOTS.nconmax, njmax=SLOTS.njmax)
    print(f"one step: qacc rel err {e['qacc_rel_err']:.2e}, qvel {e['qvel_rel_err']:.2e}, "
          f"1-ulp stock qacc {e['qacc_rel_err_ulp']:.2e}")
    assert e["tree_calls"] == 2 and e["stock_calls"] == 0
    assert e["qacc_rel_err"] < 1e-5 and e["qvel_rel_err"] < 1e-4, e


def test_trajectory_helper_runs(humanoid):
    r = F.trajectory_deviation(humanoid, nworld=2, nsteps=3, nconmax=SLOTS.nconmax,
                               njmax=SLOTS.njmax)
    assert not r["nan"] and r["nsteps"] == 3 and len(r["curve"]["dev_tree_rad"]) == 3
    assert 0 < r["max_dev_tree_rad"] < 1e-3 and r["max_dev_ulp_rad"] < 1e-3, r
    assert r["overflow_worlds"] == 0
    print(f"3 steps: max joint deviation tree {r['max_dev_tree_rad']:.2e} rad, "
          f"1-ulp stock {r['max_dev_ulp_rad']:.2e} rad")


def test_trajectory_reports_overflow_and_nan(humanoid):
    """Slots too small for the standing body: the comparison says so instead of a clean number."""
    r = F.trajectory_deviation(humanoid, nworld=2, nsteps=2, nconmax=SLOTS.nconmax, njmax=4)
    assert r["overflow_worlds"] == 6  # 2 worlds × 3 runs
    import copy

    bad = copy.deepcopy(humanoid)
    bad.key_qpos[0, 10] = np.nan
    r = F.trajectory_deviation(bad, nworld=1, nsteps=2, nconmax=SLOTS.nconmax, njmax=SLOTS.njmax)
    assert r["nan"] and np.isnan(r["max_dev_tree_rad"])


def test_benchmark_and_experiment_row(tmp_path):
    from fightlab import results

    row = F.run_experiment("chain-70", nworld=2, root=tmp_path, traj_steps=2, traj_nworld=1,
                           inner=1, repeats=1, check_nworld=1)
    df = results.read_rows("factor", tmp_path)
    assert len(df) == 1 and df.loc[0, "run_id"] == row["run_id"]
    assert df.loc[0, "factor_calls_per_step"] == 2 and df.loc[0, "levels"] == 69
    for col in ("stock_us_per_call", "tree_us_per_call", "dense_us_per_call", "step_tree_us"):
        assert df.loc[0, col] > 0, col
    assert json.loads(df.loc[0, "params"])["chunk"] == K.CHUNK
    assert json.loads(df.loc[0, "params"])["variant"] == "shared"  # "auto", resolved
    curve = results.read_curve(row["run_id"], tmp_path)
    assert curve.shape == (2, 6) and "dev_quiet_tree_rad" in curve
    assert df.loc[0, "traj_quiet_dev_tree_rad"] >= 0 and df.loc[0, "traj_pushes"] == 0  # 2 steps: no push yet
    assert mjw_types.M_BLOCK_DENSE_MAX == 64  # the dense reference restored it


def test_experiment_without_trajectory(tmp_path):
    from fightlab import results

    row = F.run_experiment("chain-70", nworld=2, root=tmp_path, traj_steps=0, inner=1, repeats=1,
                           check_nworld=1, with_dense=False, with_step=False)
    df = results.read_rows("factor", tmp_path)
    assert row["curve"] is None and not (tmp_path / "data" / "curves").exists()
    assert df.loc[0, "traj_steps"] == 0
    for col in ("traj_dev_tree_rad", "traj_quiet_dev_tree_rad", "traj_nan", "traj_overflow_worlds",
                "traj_pushes"):
        assert pd.isna(df.loc[0, col]), col  # not run: empty, not a measured 0 / False


def test_benchmark_times_each_variant_it_names(monkeypatch):
    """The "tree" column times the chosen variant and the "global" column the global one, each
    through its own calls (not one timing copied into both)."""
    seen = []
    real = K.factor_tree

    def spy(*a, variant="auto", **kw):
        seen.append(variant)
        return real(*a, variant=variant, **kw)

    monkeypatch.setattr(F, "factor_tree", spy)
    b = F.benchmark(F.chain_model(70, seed=1), nworld=2, inner=2, warmup=1, repeats=2,
                    with_dense=False, with_step=False)
    # one timed region each (no graph on the CPU): the same number of calls per variant
    n = seen.count("shared")
    assert n >= 2 * 2 and seen.count("global") == n and len(seen) == 2 * n, seen
    assert b["tree_us_per_call"] > 0 and b["tree_global_us_per_call"] > 0
    seen.clear()
    b = F.benchmark(F.chain_model(70, seed=1), nworld=2, inner=2, warmup=1, repeats=2,
                    with_dense=False, with_step=False, variant="global")
    assert set(seen) == {"global"} and len(seen) == n  # nothing to compare: timed once
    assert b["tree_global_us_per_call"] == b["tree_us_per_call"]


def test_comparisons_refuse_a_model_without_a_sparse_tree():
    small = F.chain_model(10)
    with pytest.raises(ValueError, match="nothing to replace"):
        F.trajectory_deviation(small, nworld=1, nsteps=2)
    with pytest.raises(ValueError, match="nothing to replace"):
        F.step_qacc_error(small, nworld=1)


def test_push_schedule_matches_env_defaults(humanoid):
    from fightlab.config import EnvConfig

    cfg = EnvConfig()
    dt = humanoid.opt.timestep
    n = int(round(20.0 / dt))
    f = F.push_schedule(humanoid, 50, n, np.random.default_rng(0))
    assert f.shape == (n, 50, 3) and f.dtype == np.float32 and not f[:, :, 2].any()
    mag = np.linalg.norm(f, axis=2)
    on = mag > 0
    starts = np.argwhere(np.diff(on.astype(np.int8), axis=0, prepend=0) == 1)
    # push starts 1-3 s apart (start to start, as the env counts): 20 s gives 6-20 per world
    per_world = np.bincount(starts[:, 1], minlength=50)
    assert per_world.min() >= 6 and per_world.max() <= 20, per_world
    for w in range(3):
        gaps = np.diff(starts[starts[:, 1] == w, 0]) * dt
        assert gaps.min() >= 1.0 - dt and gaps.max() <= 3.0 + dt, gaps
    # pushed where the env pushes: the torso
    import mujoco

    assert F.push_body(humanoid) == mujoco.mj_name2id(humanoid, mujoco.mjtObj.mjOBJ_BODY, "torso") > 1
    impulse = mag[on] * cfg.push_duration_s
    assert impulse.min() >= cfg.push_impulse_ns[0] - 1e-3 and impulse.max() <= cfg.push_impulse_ns[1] + 1e-3
    assert on.sum(axis=0).min() == per_world.min() * int(round(cfg.push_duration_s / dt))
    assert tuple(cfg.push_interval_s) == (1.0, 3.0)  # the schedule's defaults mirror EnvConfig


def test_quiet_trajectory_has_no_pushes_and_holds_the_key(humanoid):
    r = F.trajectory_deviation(humanoid, nworld=2, nsteps=3, nconmax=SLOTS.nconmax,
                               njmax=SLOTS.njmax, quiet=True)
    assert r["pushes"] == 0 and not r["nan"] and r["max_dev_tree_rad"] < 1e-4, r


def test_amdahl_table():
    import pandas as pd

    rows = pd.DataFrame({"body": ["a", "b"], "nworld": [1024, 8192],
                         "stock_factor_ms_per_step": [0.5, 1.0], "speedup_vs_stock": [5.0, 4.0],
                         "step_stock_us": [1000.0, 4000.0], "step_tree_us": [700.0, 0.0]})
    t = F.amdahl_table(rows)
    # a: f = 0.5, s = 5: bound 1/(0.5 + 0.1) = 1.667; gain 1000/700 = 1.4286; of bound 0.643
    assert t.loc[0, "factor_share"] == pytest.approx(0.5)
    assert t.loc[0, "amdahl_bound"] == pytest.approx(1 / 0.6)
    assert t.loc[0, "of_bound"] == pytest.approx((1000 / 700 - 1) / (1 / 0.6 - 1))
    assert t.loc[0, "steps_per_s_tree"] == pytest.approx(1024 / 700e-6)
    assert np.isnan(t.loc[1, "step_gain"])  # a zero time is not a measurement
    with pytest.raises(KeyError, match="step_tree_us"):
        F.amdahl_table(rows.drop(columns="step_tree_us"))


def test_notebook_runs_at_smoke_size(tmp_path):
    from fightlab.reproduce import reproduce

    assert reproduce(only=["03"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    text = (tmp_path / "03_factor_kernel-smoke.ipynb").read_text()
    assert "qld_rel_err" in text and "tree_factor_ms_per_step" in text
    # the Nsight Compute table is drawn from the committed profiles (cell outputs only: the
    # source names the columns too)
    nb = json.loads(text)
    outputs = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "warp_cycles_per_issued_instruction" in outputs and "NVIDIA H200" in outputs


def test_experiment_refuses_to_time_a_wrong_kernel(monkeypatch, tmp_path):
    """Correctness before speed: a broken factor raises before any timing or row."""
    def broken(m, d, M, L, D, schedule=None, block_dim=K.BLOCK_DIM, variant="auto"):
        K.stock_factor(m, d, M, L, D)
        L.fill_(0.5)

    monkeypatch.setattr(F, "factor_tree", broken)
    with pytest.raises(RuntimeError, match="disagrees with stock"):
        F.run_experiment("chain-70", nworld=1, root=tmp_path, traj_steps=2, traj_nworld=1,
                         inner=1, repeats=1, check_nworld=1)
    assert not (tmp_path / "data").exists()


def _probe():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "factor_probe", Path(__file__).resolve().parents[1] / "bench" / "factor_probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("variant", ["global", "shared"])
def test_probe_checks_L_and_D_before_timing(variant, monkeypatch, capsys):
    """bench/factor_probe.py (the lanes' check: job, and what ncu profiles) refuses a variant whose
    D is wrong even when L is right, and times nothing then."""
    probe = _probe()
    probe.main(2, "cpu")
    assert capsys.readouterr().out.startswith("probe nworld=2: stock ")
    real = K.factor_tree

    def wrong_d(m, d, M, L, D, schedule=None, block_dim=K.BLOCK_DIM, variant="auto", _bad=variant):
        real(m, d, M, L, D, schedule=schedule, block_dim=block_dim, variant=variant)
        if variant == _bad:
            D.assign(D.numpy() * 1.01)  # 1 % off: far beyond float32 rounding

    timed = []
    monkeypatch.setattr(K, "factor_tree", wrong_d)
    monkeypatch.setattr(probe.time, "perf_counter", lambda: timed.append(1) or 0.0)
    with pytest.raises(SystemExit, match=rf"{variant} disagrees with stock in D \(qLDiagInv\): "
                                         r"relative error 1\.00e-02"):  # relative, not absolute
        probe.main(2, "cpu")
    assert not timed
