"""The single-launch Newton solve (fightlab.kernels.newton) against MuJoCo Warp's solver, on
warp's CPU device with real block barriers (64 cooperative fibers per world).

Tolerance: both solves are float32 runs of the same problem, so "equal within float32 rounding"
is measured against a float64 run of the same algorithm (fightlab.measure.newton.reference_solve,
from the same float32 inputs): the kernel's normwise error (max |x - ref| / max |ref|) in qacc,
efc_force and qfrc_constraint is at most 3x stock's own or TOL = 1e-4, and kernel and stock
differ by at most 2·TOL. Why 1e-4: H = M + JᵀDJ has cond(H) about 3e4 on both bodies, so a
float32 solve's first-order bound is cond(H)·eps ≈ 4e-3; measured, stock's own error reaches
6.6e-5 and the kernel's 5.4e-5 over states like these (either may be the larger one in a given
state: the summation orders differ), and the kernel's LDLᵀ solves H·x = g to 2.9e-6 where a
textbook float32 Cholesky gets 5.6e-6. Row states, iteration counts and overflow bits must be
equal. A rollout of 100 steps stays within 10x the drift that a one-ulp perturbation of qvel
gives stock (or 5e-5 m/rad).
"""

from __future__ import annotations

import mujoco
import pytest
import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src import solver as mjw_solver

from conftest import newton_model
from fightlab.bodies import build
from fightlab.kernels import newton as N
from fightlab.measure import newton as NM
from fightlab.sim import physics

TOL = 1e-4



@pytest.mark.parametrize("name", ["simple", "muscular-fast", "tree"])
@pytest.mark.parametrize("seed,noise", [(0, 0.05), (1, 0.2)])
def test_one_solve_equals_mujoco_warp(name, seed, noise, cpu_blocks):
    mjm, slots = newton_model(name)
    e = NM.solve_errors(mjm, nworld=3, seed=seed, slots=slots, noise=noise, nsteps=5)
    print(name, {k: v for k, v in e.items()})
    assert sum(e["nefc"]) > 0, e
    for k in ("qacc", "efc_force", "qfrc_constraint"):
        assert e[f"{k}_new_f64"] <= max(3.0 * e[f"{k}_stock_f64"], TOL), (k, e)
        assert e[f"{k}_new_stock"] <= 2 * TOL, (k, e)
    assert e["state_diff_new_stock"] == 0 and e["niter_equal"] and e["overflow_equal"], e


def test_the_held_out_tree_is_single_tree_with_contacts_and_limits():
    mjm = NM.contact_tree_model(16, seed=0)
    assert mjm.ntree == 1 and mjm.nv == 22 and mjm.jnt_limited.sum() == 16
    m, _ = physics.put(mjm, 1, physics.Slots(None, None, "given"), "cpu")
    assert m.is_sparse and N.newton_support(m) is None


def test_a_state_over_its_constraint_slots_is_named_not_indexed():
    """40 hinges on the floor give more rows than the default njmax: one line naming both."""
    with pytest.raises(ValueError, match=r"world \d+ has nefc \d+ over njmax 64"):
        NM.solve_errors(NM.contact_tree_model(40), nworld=2, device="cpu")


@pytest.mark.parametrize("name", ["simple", "tree"])
def test_rollout_100_steps(name, cpu_blocks):
    mjm, slots = newton_model(name)
    e = NM.rollout_errors(mjm, nworld=2, nsteps=100, seed=1, slots=slots)
    print(name, e["qpos_new_stock"], e["qpos_ulp_stock"], e["nefc_max"])
    assert e["nefc_max"] > 0
    assert e["qpos_new_stock"] <= max(10.0 * e["qpos_ulp_stock"], 5e-5), e


def test_two_trees_fall_back_with_one_line(capsys):
    m, _ = physics.put(NM.two_tree_model(), 1, physics.Slots(None, None, "given"), "cpu")
    reason = N.newton_support(m)
    assert reason is not None and "2 kinematic trees" in reason and "\n" not in reason
    assert N.use_newton(m) == reason
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fightlab: MuJoCo Warp's solver runs, not the single-launch Newton solve: {reason}"]
    assert not N.is_newton_enabled(m) and mjw_solver.solve is N.stock_solve


@pytest.mark.parametrize("change,words", [
    (lambda s: setattr(s.option, "cone", mujoco.mjtCone.mjCONE_ELLIPTIC), "elliptic"),
    (lambda s: setattr(s.option, "jacobian", mujoco.mjtJacobian.mjJAC_DENSE), "dense constraint Jacobian"),
    (lambda s: setattr(s.option, "noslip_iterations", 2), "noslip"),
    (lambda s: setattr(s.option, "solver", mujoco.mjtSolver.mjSOL_CG), "Newton only"),
])
def test_other_refusals(change, words):
    spec = mujoco.MjSpec.from_string(_xml())
    change(spec)
    m, _ = physics.put(spec.compile(), 1, physics.Slots(None, None, "given"), "cpu")
    reason = N.newton_support(m)
    assert reason is not None and words in reason, reason


def _xml() -> str:
    """A small single tree with a floor, as XML (MjSpec edits its options)."""
    return """<mujoco><option jacobian="sparse"/><worldbody><geom type="plane" size="1 1 .1"/>
      <body pos="0 0 .2"><freejoint/><geom type="sphere" size=".1"/>
      <body pos="0 0 -.1"><joint type="hinge" range="-.5 .5" limited="true"/>
      <geom type="capsule" size=".02" fromto="0 0 0 .1 0 0"/></body></body></worldbody></mujoco>"""


def test_the_switch_dispatches_per_model_and_restores_stock(cpu_blocks, monkeypatch):
    mjm = NM.contact_tree_model(8, seed=3)
    (m1, d1), (m2, d2) = [physics.put(mjm, 1, physics.Slots(None, None, "given"), "cpu") for _ in range(2)]
    calls, real = [], N.newton_solve
    monkeypatch.setattr(N, "newton_solve", lambda m, d, block_dim=N.BLOCK_DIM: (calls.append(m), real(m, d, block_dim)))
    try:
        assert N.use_newton(m1) is None and N.is_newton_enabled(m1) and not N.is_newton_enabled(m2)
        mjw.step(m1, d1)
        mjw.step(m2, d2)
        assert calls == [m1]
    finally:
        N.disable_newton(m1)
    assert mjw_solver.solve is N.stock_solve and not N.is_newton_enabled(m1)
    with pytest.raises(ValueError, match="block_dim"):
        N.use_newton(m1, block_dim=0)


@pytest.mark.parametrize("graph", [False, True])
def test_the_env_opt_in_runs_the_same_physics(graph, cpu_blocks):
    """`TrainConfig.solver_loop = "single_launch"`: the env switches the solve on for its model
    (engine_solver records it, and the kernel's build) and steps the physics of "unrolled" to float32 rounding."""
    import numpy as np
    import torch

    from fightlab.envs.stance import StanceEnv

    envs = {}
    for loop in ("unrolled", "single_launch"):
        env = envs[loop] = StanceEnv("simple", 2, "cpu", seed=3, graph=graph, solver_loop=loop)
        env.reset()
        gen = torch.Generator().manual_seed(0)
        for _ in range(10):
            env.action[:] = torch.rand(env.action.shape, generator=gen) * 2 - 1
            env.step()
    a, b = envs["unrolled"], envs["single_launch"]
    try:
        assert not a.newton_kernel and b.newton_kernel and N.is_newton_enabled(b.m)
        assert b.engine_solver["solver_loop"] == "single_launch" and a.engine_solver["solver_loop"] == "unrolled"
        assert b.engine_solver["newton_build"] == list(N.built_fixes(b.m)) and "newton_build" not in a.engine_solver
        np.testing.assert_allclose(b.d.qpos.numpy(), a.d.qpos.numpy(), atol=1e-4)
        np.testing.assert_array_equal(b.d.solver_niter.numpy(), a.d.solver_niter.numpy())
    finally:
        b.close()
    assert not N.is_newton_enabled(b.m) and mjw_solver.solve is N.stock_solve


def test_the_stage_clock_leaves_the_solve_unchanged(cpu_blocks):
    """The instrumented build (``stage_clock``) writes the same outputs bit for bit, and counts."""
    import numpy as np

    from fightlab.kernels import stage_clock as C

    m, d = physics.put(NM.contact_tree_model(8, seed=1), 2, physics.Slots(None, None, "given"), "cpu")
    for _ in range(30):
        mjw.step(m, d)
    mjw.forward(m, d)
    outs = []
    for clock in (None, wp.zeros((2, C.NCOLS), dtype=wp.int64, device="cpu")):
        d.overflow.zero_()
        N.newton_solve(m, d, stage_clock=clock)
        outs.append([d.qacc.numpy().copy(), d.efc.force.numpy().copy(), d.solver_niter.numpy().copy()])
    for x, y in zip(*outs):
        np.testing.assert_array_equal(x, y)
    a = clock.numpy()
    ns = len(C.STAGES)
    assert (a[:, :ns] >= 0).all() and (a[:, :ns].sum(axis=1) > 0).all() and (a[:, ns] >= 1).all(), a
    with pytest.raises(ValueError, match="stage_clock must have shape"):
        N.newton_solve(m, d, stage_clock=wp.zeros((2, 3), dtype=wp.int64, device="cpu"))


def test_the_stage_bench_runs_on_the_cpu(tmp_path):
    """bench/newton_stages.sh at smoke size: the table and a row per (body, nworld) in $OUT."""
    import csv
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fightlab.kernels.newton_hessian import FIXES

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, DEVICE="cpu", NSTEPS="2", FIXES="none all", PY=sys.executable, OUT=str(tmp_path),
               PYTHONPATH=str(root))
    r = subprocess.run(["bash", str(root / "bench" / "newton_stages.sh"), "simple", "2"], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "LDLt" in r.stdout and "rebuilds per solve" in r.stdout, r.stdout
    rows = list(csv.DictReader((tmp_path / "newton_stages.csv").open()))
    assert len(rows) == 2 and {r["body"] for r in rows} == {"simple"} and rows[0]["nworld"] == "2"
    assert [json.loads(r["params"])["fixes"] for r in rows] == [[], list(FIXES)]
    assert float(rows[0]["total_cycles"]) > 0 and {"gpu", "driver", "commit"} <= set(rows[0])
    from fightlab import results

    nrows = results.read_rows("newton", tmp_path)  # the same two as newton rows, for data/results/
    assert len(nrows) == 2 and list(nrows["solve_cycles_median"]) == [float(r["total_cycles"]) for r in rows]
    params = [json.loads(p) for p in nrows["params"]]
    assert [p["variant"] for p in params] == ["none", "all"] and params[1]["fixes"] == list(FIXES)
    assert params[0]["size"] == "stages" and params[0]["stage_cycles"]["LDLt"] == float(rows[0]["LDLt_cycles"])
    for p, r in zip(params, rows):  # the slowest world beside the median: a launch waits for it
        assert float(r["total_cycles"]) <= p["solve_cycles_p90"] <= p["solve_cycles_max"]


@pytest.mark.parametrize("var,value", [("NWARM", "abc"), ("NWARM", "1.5"), ("NSTEPS", "-3")])
def test_the_stage_bench_refuses_a_step_count_that_is_no_whole_number(tmp_path, var, value):
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, DEVICE="cpu", OUT=str(tmp_path), **{var: value})
    r = subprocess.run(["bash", str(root / "bench" / "newton_stages.sh"), "simple", "2"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == f"newton_stages: {var} must be a whole number, got '{value}'"
    assert not any(tmp_path.iterdir())


def _builds_agree(name: str, fixes_a: tuple, fixes_b: tuple):
    """One solve from the same contact state (40 MuJoCo Warp steps, 2 worlds) with each kernel
    build: the same row states and iteration counts, qacc within float32 rounding. Returns (m, d)."""
    import numpy as np

    mjm, slots = newton_model(name)
    m, d = physics.put(mjm, 2, slots or physics.Slots(None, None, "given"), "cpu")
    for _ in range(40):
        mjw.step(m, d)
    mjw.forward(m, d)
    outs = []
    for fixes in (fixes_a, fixes_b):
        d.overflow.zero_()
        N.newton_solve(m, d, fixes=fixes)
        outs.append((d.qacc.numpy().copy(), d.efc.state.numpy().copy(), d.solver_niter.numpy().copy()))
    assert d.nefc.numpy().sum() > 0
    (qa, sa, na), (qb, sb, nb) = outs
    np.testing.assert_array_equal(sa, sb)
    np.testing.assert_array_equal(na, nb)
    assert np.abs(qa - qb).max() <= TOL * np.abs(qa).max()
    return m, d


@pytest.mark.parametrize("name", ["simple", "tree"])
def test_the_first_build_and_the_fixed_one_agree(name, cpu_blocks):
    """``fixes=()`` (the kernel as first built: row-owned LDLᵀ, M through M_elemid, every lane's
    JᵀDJ pairs from (0, 0), no register cap) against all fixes: the same row states and
    iteration counts, qacc within float32 rounding (only summation orders differ)."""
    from fightlab.kernels.newton_hessian import FIXES

    m, d = _builds_agree(name, (), FIXES)
    with pytest.raises(ValueError, match="fixes must be a tuple, a subset"):
        N.newton_solve(m, d, fixes=("faster",))


def test_the_tree_factor_is_taken_only_where_rows_are_chains():
    """Both bodies' rows lie on root-to-body chains (the tree-sparse LDLᵀ runs); two sibling
    limbs that may touch each other break the pattern (the dense LDLᵀ runs)."""
    from fightlab.kernels.newton_tree import rows_are_chains

    for name in ("simple", "muscular-fast"):
        m, _ = physics.put(build(name), 1, physics.slots_for(name), "cpu")
        assert rows_are_chains(m), name
    xml = """<mujoco><option jacobian="sparse"/><worldbody><geom type="plane" size="1 1 .1"/>
      <body pos="0 0 .2"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/>
      <body pos="0 0 -.1"><joint type="hinge"/><geom type="capsule" size=".02" fromto="0 0 0 .1 0 0"/></body>
      <body pos="0 0 -.1"><joint type="hinge"/><geom type="capsule" size=".02" fromto="0 0 0 0 .1 0"/></body>
      </body></worldbody></mujoco>"""
    m, _ = physics.put(mujoco.MjModel.from_xml_string(xml), 1, physics.Slots(None, None, "given"), "cpu")
    assert N.newton_support(m) is None and not rows_are_chains(m)


def test_the_level_table_covers_every_update_once_by_height():
    """:func:`newton_tree.level_schedule` on both bodies: one level per height (muscular-fast 25,
    simple 19: the longest root-to-leaf chain), every (pivot, entry) update of the serial factor
    exactly once, a target once per level (one owner thread), and every entry a term reads (its
    row of the pivot, the pivot) final: a target of earlier levels only."""
    import numpy as np

    from fightlab.kernels.newton_tree import level_parts, level_schedule

    for name, nlevel in (("simple", 19), ("muscular-fast", 25)):
        m, _ = physics.put(build(name), 1, physics.slots_for(name), "cpu")
        rownnz, rowadr, colind = m.M_rownnz.numpy(), m.M_rowadr.numpy(), m.M_colind.numpy()
        t = level_schedule(rownnz, rowadr, colind)
        L, T, C = (int(x) for x in t[:3])
        parts = level_parts(t)
        lvl, tgt_e, tgt_adr, ab, kk = (parts[k] for k in ("lvl", "tgt_e", "tgt_adr", "ab", "kk"))
        assert sum(len(v) for v in parts.values()) == len(t) - 3  # the table is these arrays, nothing else
        assert L == nlevel and len(kk) == C and lvl[0] == 0 and lvl[-1] == T and tgt_adr[-1] == C
        n = rownnz - 1
        assert C == int(np.sum(n * (n + 1) // 2 + n))  # the serial factor's updates, each once
        last = {}  # entry -> the last level that writes it
        for lv in range(L):
            here = [int(e) for e in tgt_e[lvl[lv]:lvl[lv + 1]]]
            assert len(here) == len(set(here))  # one owner per entry and level
            last.update(dict.fromkeys(here, lv))
        pivots = np.where(kk >= 0, kk, -kk - 1)
        for lv in range(L):
            for ti in range(lvl[lv], lvl[lv + 1]):
                for c in range(tgt_adr[ti], tgt_adr[ti + 1]):
                    for e in (int(ab[c]) & 0xFFFF, int(ab[c]) >> 16, int(pivots[c])):
                        assert last.get(e, -1) < lv, (name, lv, e)


@pytest.mark.parametrize("fix", ["levels", "matvec", "depth", "lean"])
@pytest.mark.parametrize("name", ["simple", "tree"])
def test_each_late_fix_leaves_the_solve_as_it_was(name, fix, cpu_blocks):
    """The level-scheduled factor against the serial tree factor, M·x in chunks (and the trace
    gathered in parallel) against a row per thread (both: every fix with and without it); the
    back substitution by the host's depth table against the in-kernel search, the lean factor
    (two items at a time) against the serial one (both: the default build without either, with
    it alone, since "levels" replaces the serial factor): the same row states and iteration
    counts, qacc within float32 rounding."""
    from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES

    if fix in ("depth", "lean"):
        assert fix in DEFAULT_FIXES and "levels" not in DEFAULT_FIXES
        base = tuple(f for f in DEFAULT_FIXES if f not in ("depth", "lean"))
        _builds_agree(name, base, base + (fix,))
    else:
        _builds_agree(name, tuple(f for f in FIXES if f != fix), FIXES)


def test_depth_and_lean_leave_muscular_fasts_solve_as_it_was(cpu_blocks):
    """The deepest body (25 levels, up to 324 items a step): the default build with and without
    both, the same row states and iteration counts, qacc within float32 rounding."""
    from fightlab.kernels.newton_hessian import DEFAULT_FIXES

    _builds_agree("muscular-fast", tuple(f for f in DEFAULT_FIXES if f not in ("depth", "lean")), DEFAULT_FIXES)


def test_the_lean_factor_is_taken_only_where_its_reads_are_safe():
    """``solve_kernel`` builds "lean" and "depth" for a single-tree body whose M CSR arrays are
    contiguous (their raw reads assume it) and leaves them out (the serial factor, the search by
    depth) for a strided M_colind."""
    import numpy as np

    from fightlab.kernels.newton_hessian import DEFAULT_FIXES

    base = tuple(f for f in DEFAULT_FIXES if f not in ("depth", "lean"))
    m, _ = physics.put(build("simple"), 1, physics.slots_for("simple"), "cpu")
    assert m.M_colind.is_contiguous
    for fix in ("lean", "depth"):
        assert N.solve_kernel(m, fixes=base + (fix,)) is not N.solve_kernel(m, fixes=base)
    assert set(N.built_fixes(m)) == set(DEFAULT_FIXES)
    twice = np.repeat(m.M_colind.numpy(), 2)
    m.M_colind = wp.array(twice, dtype=int, device="cpu")[::2]
    assert not m.M_colind.is_contiguous
    assert N.solve_kernel(m, fixes=DEFAULT_FIXES) is N.solve_kernel(m, fixes=base)
    assert set(N.built_fixes(m)) == set(base)


def test_the_depth_table_lists_every_dof_once_by_depth():
    """:func:`newton_tree.depth_schedule`: each DOF once, in its depth's slice (its row count),
    depths root first; both bodies' tables as their M; bad row counts refused."""
    import numpy as np

    from fightlab.kernels.newton_tree import depth_schedule

    t = depth_schedule(np.array([1, 2, 3, 2, 1, 3]))
    assert list(t) == [3, 0, 2, 4, 6, 0, 4, 1, 3, 2, 5]
    for name in ("simple", "muscular-fast"):
        m, _ = physics.put(build(name), 1, physics.slots_for(name), "cpu")
        n = m.M_rownnz.numpy()
        t = depth_schedule(n)
        depth, start, dofs = int(t[0]), t[1:int(t[0]) + 2], t[int(t[0]) + 2:]
        assert depth == n.max() and sorted(dofs) == list(range(m.nv)) and start[-1] == m.nv
        for lv in range(depth):
            assert all(n[k] == lv + 1 for k in dofs[start[lv]:start[lv + 1]])
    assert list(depth_schedule(np.array([], dtype=int))) == [0, 0]
    with pytest.raises(ValueError, match="M_rownnz must be >= 1 .* got 0"):
        depth_schedule(np.array([1, 0]))


def test_the_chunk_table_covers_each_row_of_m_in_order():
    """:func:`newton_matvec.mulm_chunks`: a row's chunks tile its CSR range in order, none longer
    than CHUNK, none empty; the root's rows of muscular-fast (every DOF) split into 12."""
    import numpy as np

    from fightlab.kernels.newton_matvec import CHUNK, mulm_chunks

    for name in ("simple", "muscular-fast"):
        m, _ = physics.put(build(name), 1, physics.slots_for(name), "cpu")
        adr = m.M_mulm_rowadr.numpy()
        t = mulm_chunks(adr)
        nchunk, size, nv = int(t[0]), int(t[1]), m.nv
        rc, k0, k1 = t[2:3 + nv], t[3 + nv:3 + nv + nchunk], t[3 + nv + nchunk:]
        assert size == CHUNK and len(k1) == nchunk and rc[0] == 0 and rc[-1] == nchunk
        for r in range(nv):
            cs = range(rc[r], rc[r + 1])
            assert [k0[c] for c in cs][:1] == [adr[r]] and [k1[c] for c in cs][-1:] == [adr[r + 1]]
            assert all(k1[c] == k0[c + 1] for c in cs[:-1]) and all(0 < k1[c] - k0[c] <= CHUNK for c in cs)
        if name == "muscular-fast":
            assert int(np.max(np.diff(rc))) == -(-nv // CHUNK)


def test_the_default_build_is_named_recorded_and_used_unless_told(capsys):
    """``newton_solve`` builds ``DEFAULT_FIXES`` unless told (the fastest measured: no "levels");
    the variant "default" names it, a stage row with no fixes records it, a bad name is refused."""
    import inspect
    import json

    from fightlab.kernels import stage_clock as C
    from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES
    from fightlab.measure.newton_stages import stage_row, variant_fixes

    assert set(DEFAULT_FIXES) < set(FIXES) and "levels" not in DEFAULT_FIXES
    assert inspect.signature(N.newton_solve).parameters["fixes"].default == DEFAULT_FIXES
    assert variant_fixes("default") == DEFAULT_FIXES and variant_fixes("all") == FIXES
    assert variant_fixes("none") == () and variant_fixes("tree,levels") == ("tree", "levels")
    with pytest.raises(ValueError, match="'all', 'default', 'none'.*got 'fastest'"):
        variant_fixes("fastest")
    from fightlab.measure.newton_stages import main

    assert main(["--device", "cpu", "--fixes", "default", "fastest"]) == 2  # refused before any work
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fightlab: error: --fixes:") and "'fastest'" in err[0], err
    for bad in (["--nwarm", "-1"], ["--nsteps", "0"]):
        assert main(["--device", "cpu", *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and bad[1] in err[0] and "--nwarm >= 0" in err[0], err
    row = stage_row("simple", 2, 2, "cpu", dict.fromkeys((*C.STAGES, "total", *C.COUNTS, "nefc_median", "nefc_max",
                                                          "nv"), 1.0))
    assert json.loads(row["params"])["fixes"] == list(DEFAULT_FIXES)


def test_rows_record_the_fixes_the_kernel_was_built_with():
    """``built_fixes``: the tree's switches need "tree" (and "lean" gives way to "levels"), so a
    variant asking for more records what the kernel had; the stage clock's rows say both."""
    import json

    from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES
    from fightlab.measure.newton_stages import stage_cycles, stage_row

    m, _ = physics.put(build("simple"), 1, physics.slots_for("simple"), "cpu")
    assert N.built_fixes(m, DEFAULT_FIXES) == DEFAULT_FIXES
    assert N.built_fixes(m, ("bounds", "lean", "depth", "levels")) == ("bounds",)
    assert N.built_fixes(m, FIXES) == tuple(f for f in FIXES if f != "lean")
    assert N.built_fixes(m, ("tree", "lean")) == ("tree", "lean")
    with pytest.raises(ValueError, match="fixes must be a tuple, a subset of"):
        N.built_fixes(m, ("tree", "fast"))
    with pytest.raises(ValueError, match="got 'tree'"):
        N.built_fixes(m, "tree")
    with pytest.raises(ValueError, match="got .'fast',."):  # refused at the switch, not at the first step
        N.use_newton(m, fixes=("fast",))
    r = stage_cycles("simple", 1, 1, "cpu", nwarm=2, fixes=("bounds", "lean"))
    assert r["built"] == ["bounds"]
    params = json.loads(stage_row("simple", 1, 1, "cpu", r, ("bounds", "lean"))["params"])
    assert params["fixes"] == ["bounds", "lean"] and params["built"] == ["bounds"]


def test_the_factor_critical_path_counts_the_busiest_threads_work():
    """A root with two leaf children (rows [0], [0, 1], [0, 2]): 4 items in 2 steps serially,
    2 targets of 2 terms at one height; with 2 threads 2 and 2. The bodies: about as many terms
    on the busiest thread by height as by DOF (the levels build's barriers were not its cost)."""
    import numpy as np

    from fightlab.kernels.newton_tree import factor_critical_path

    tree = (np.array([1, 2, 2]), np.array([0, 1, 3]), np.array([0, 0, 1, 0, 2]))
    assert factor_critical_path(*tree, nthread=1) == dict(serial=4, levels=4, steps=3, heights=2)
    assert factor_critical_path(*tree, nthread=2) == dict(serial=2, levels=2, steps=3, heights=2)
    with pytest.raises(ValueError, match="nthread must be an int >= 1, got 0"):
        factor_critical_path(*tree, nthread=0)
    for name, heights in (("simple", 19), ("muscular-fast", 25)):
        m = build(name)
        c = factor_critical_path(m.M_rownnz, m.M_rowadr, m.M_colind)
        assert c["steps"] == m.nv and c["heights"] == heights
        assert 0.9 <= c["levels"] / c["serial"] <= 1.1, c
