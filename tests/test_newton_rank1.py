"""The single-launch Newton solve's rank-1 path (fightlab.kernels.newton_rank1, the switch
"update"): after a step that flipped a few rows, the tree factor is updated in place of a
rebuild. Against MuJoCo Warp's solver on warp's CPU device with real block barriers, with the
tolerances of tests/test_newton.py; the stage clock's counts say the path (and its refusal) ran.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from conftest import newton_model
from fightlab.bodies import build
from fightlab.kernels import newton as N
from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES
from fightlab.kernels.newton_rank1 import MAX_FLIPS, extra_floats, sort_func
from fightlab.measure import newton as NM
from fightlab.sim import physics

TOL = 1e-4
UPDATE = DEFAULT_FIXES + ("update",)


def _assert_equal_to_stock(e: dict) -> None:
    for k in ("qacc", "efc_force", "qfrc_constraint"):
        assert e[f"{k}_new_f64"] <= max(3.0 * e[f"{k}_stock_f64"], TOL), (k, e)
        assert e[f"{k}_new_stock"] <= 2 * TOL, (k, e)
    assert e["state_diff_new_stock"] == 0 and e["niter_equal"] and e["overflow_equal"], e


@pytest.mark.parametrize("name,seed,noise", [("simple", 1, 0.2), ("muscular-fast", 1, 0.2), ("tree", 1, 0.2),
                                              ("tree", 0, 0.05)])
def test_the_rank1_path_equals_mujoco_warp_and_replaces_rebuilds(name, seed, noise, cpu_blocks):
    """Each body, a state whose steps flip rows (rows entering the quadratic state, and in the
    tree's seed 0 rows leaving it: downdates): the update path runs (counted) in place of some
    rebuilds, nothing refused, and the solve equals MuJoCo Warp's within float32 rounding."""
    mjm, slots = newton_model(name)
    e = NM.solve_errors(mjm, nworld=3, seed=seed, slots=slots, noise=noise, nsteps=5, fixes=UPDATE, stage_clock=True)
    print(name, e["counts"])
    _assert_equal_to_stock(e)
    c = e["counts"]
    assert sum(c["updates"]) > 0 and sum(c["refusals"]) == 0, c
    assert all(r >= 1 for r in c["rebuilds"]), c  # the solve's first factorization is always a rebuild
    base = NM.solve_errors(mjm, nworld=3, seed=seed, slots=slots, noise=noise, nsteps=5, stage_clock=True)
    assert sum(base["counts"]["updates"]) == 0  # the default build has no rank-1 path
    assert [a + b for a, b in zip(c["rebuilds"], c["updates"])] == base["counts"]["rebuilds"]


@pytest.mark.parametrize("name", ["simple", "tree"])
def test_the_rank1_path_with_matvec_keeps_the_factor(name, cpu_blocks):
    """"matvec"'s chunk sums go past the rank-1 region: with both, the updates still run and the
    solve equals MuJoCo Warp's (sums written over the factor would break it)."""
    mjm, slots = newton_model(name)
    e = NM.solve_errors(mjm, nworld=3, seed=1, slots=slots, noise=0.2, nsteps=5, fixes=UPDATE + ("matvec",),
                        stage_clock=True)
    _assert_equal_to_stock(e)
    assert sum(e["counts"]["updates"]) > 0, e["counts"]


def test_a_refused_downdate_falls_back_to_a_refactorization(cpu_blocks):
    """``rtol`` near 1 refuses downdates midway: the half-changed factor is rebuilt, and the solve
    still equals MuJoCo Warp's."""
    mjm, slots = newton_model("tree")
    e = NM.solve_errors(mjm, nworld=3, seed=0, slots=slots, noise=0.05, nsteps=5, fixes=UPDATE, stage_clock=True,
                        rtol=0.99999)
    print(e["counts"])
    assert sum(e["counts"]["refusals"]) > 0, e["counts"]
    _assert_equal_to_stock(e)
    m, d = physics.put(mjm, 1, physics.Slots(None, None, "given"), "cpu")
    for bad in (1.0, -0.1, float("nan"), True, "0.5", None, [0.5]):
        with pytest.raises(ValueError, match="rtol must be a number in"):
            N.newton_solve(m, d, fixes=UPDATE, rtol=bad)
    for bad in (iter(UPDATE), set(UPDATE), "tree"):  # an iterator would be used up by the check
        with pytest.raises(ValueError, match="fixes must be a tuple"):
            N.newton_solve(m, d, fixes=bad)


def test_more_flips_than_the_path_takes_rebuild(cpu_blocks):
    """``max_flips`` 0: every step that flipped a row rebuilds (the default build's rebuild counts,
    no update); 2: only steps with ≤ 2 flips are updated (in this state fewer than with the
    default 8: most steps flip 2–4 rows); the solve equals MuJoCo Warp's either way. Out-of-range
    values are refused."""
    mjm, slots = newton_model("tree")
    kw = dict(nworld=3, seed=1, slots=slots, noise=0.2, nsteps=5, fixes=UPDATE, stage_clock=True)
    base = NM.solve_errors(mjm, **(kw | {"fixes": DEFAULT_FIXES}))["counts"]
    runs = {k: NM.solve_errors(mjm, **kw, max_flips=k) for k in (0, 2, MAX_FLIPS)}
    for e in runs.values():
        _assert_equal_to_stock(e)
    c = {k: e["counts"] for k, e in runs.items()}
    print({k: (sum(v["updates"]), sum(v["rebuilds"])) for k, v in c.items()})
    assert sum(c[0]["updates"]) == 0 and c[0]["rebuilds"] == base["rebuilds"]
    assert 0 < sum(c[2]["updates"]) < sum(c[MAX_FLIPS]["updates"])
    m, d = physics.put(mjm, 1, physics.Slots(None, None, "given"), "cpu")
    for bad in (-1, MAX_FLIPS + 1, 2.0, True):
        with pytest.raises(ValueError, match="max_flips must be an int in"):
            N.newton_solve(m, d, fixes=UPDATE, max_flips=bad)
    N.solve_kernel(m, fixes=UPDATE, rtol=np.float32(0.5), max_flips=np.int64(2))  # numpy scalars are numbers


def test_a_rollout_with_the_rank1_path_stays_with_mujoco_warp(cpu_blocks):
    """100 steps of the held-out tree with the switch on: within 10x a one-ulp nudge's drift."""
    mjm, slots = newton_model("tree")
    e = NM.rollout_errors(mjm, nworld=2, nsteps=100, seed=1, slots=slots, fixes=UPDATE)
    assert e["nefc_max"] > 0
    assert e["qpos_new_stock"] <= max(10.0 * e["qpos_ulp_stock"], 5e-5), e


def test_the_rank1_path_is_built_only_where_it_can_keep_the_factor():
    """"update" needs the tree factor (rows on chains); its kernel has more shared floats (the
    vector w, the count, the list, and with "matvec" the chunk sums past them)."""
    import mujoco

    from fightlab.kernels.newton_matvec import mulm_chunks

    m, _ = physics.put(build("simple"), 1, physics.slots_for("simple"), "cpu")
    assert N.built_fixes(m, UPDATE) == UPDATE
    assert "update" not in N.built_fixes(m, ("bounds", "update"))  # no tree
    assert N.built_fixes(m, ("tree", "matvec", "update")) == ("tree", "matvec", "update")
    assert "update" in N.built_fixes(m, FIXES)
    tri, nchunk = (m.nv + 1) * (m.nv + 2) // 2, int(mulm_chunks(m.M_mulm_rowadr.numpy())[0])
    assert N.shared_floats(m.nv, True) >= tri + extra_floats(m.nv) > N.shared_floats(m.nv) - 256
    assert N.shared_floats(m.nv, True, nchunk) >= tri + extra_floats(m.nv) + nchunk
    # per listed row its w and its chain (nv each), its sign and leaf depth; two flags, count, list
    assert extra_floats(m.nv) == 2 * MAX_FLIPS * m.nv + 2 * MAX_FLIPS + 2 + 1 + MAX_FLIPS
    assert N.shared_floats(89, True, 512) <= N.SHARED_MAX  # muscular-fast's nv with matvec's sums
    xml = """<mujoco><option jacobian="sparse"/><worldbody><geom type="plane" size="1 1 .1"/>
      <body pos="0 0 .2"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/>
      <body pos="0 0 -.1"><joint type="hinge"/><geom type="capsule" size=".02" fromto="0 0 0 .1 0 0"/></body>
      <body pos="0 0 -.1"><joint type="hinge"/><geom type="capsule" size=".02" fromto="0 0 0 0 .1 0"/></body>
      </body></worldbody></mujoco>"""
    m2, _ = physics.put(mujoco.MjModel.from_xml_string(xml), 1, physics.Slots(None, None, "given"), "cpu")
    assert "update" not in N.built_fixes(m2, UPDATE)  # rows off one chain: the dense factor, no update


def test_the_forward_table_holds_each_gradient_term_once_by_height():
    """``level_schedule(..., rhs_only=True)``: only the gradient row's targets, every (pivot,
    ancestor) term of the serial factor's riding row once, at the pivot's height, reading only
    entries final before it (a target of earlier heights, or a factor entry)."""
    from fightlab.kernels.newton_tree import level_parts, level_schedule

    for name in ("simple", "muscular-fast"):
        m, _ = physics.put(build(name), 1, physics.slots_for(name), "cpu")
        rownnz, rowadr, colind = m.M_rownnz.numpy(), m.M_rowadr.numpy(), m.M_colind.numpy()
        nv, rhs = m.nv, m.nv * (m.nv + 1) // 2
        full, t = level_schedule(rownnz, rowadr, colind), level_schedule(rownnz, rowadr, colind, rhs_only=True)
        assert t[0] == full[0] and len(t) < len(full)  # the same heights, fewer terms
        parts = level_parts(t)
        lvl, tgt_e, tgt_adr, ab, kk = (parts[k] for k in ("lvl", "tgt_e", "tgt_adr", "ab", "kk"))
        assert (tgt_e >= rhs).all() and (kk < 0).all()
        assert len(kk) == int(np.sum(rownnz - 1))  # one term per (DOF, ancestor)
        terms = set()
        written = {}
        for lv in range(int(t[0])):
            for ti in range(lvl[lv], lvl[lv + 1]):
                a = int(tgt_e[ti]) - rhs
                written[int(tgt_e[ti])] = lv
                for c in range(tgt_adr[ti], tgt_adr[ti + 1]):
                    ia, ib, pk = int(ab[c]) & 0xFFFF, int(ab[c]) >> 16, -int(kk[c]) - 1
                    k = ib - rhs
                    assert pk == k * (k + 1) // 2 + k and ia == k * (k + 1) // 2 + a and a < k < nv
                    assert written.get(ib, -1) < lv  # y_k final before it is used
                    terms.add((k, a))
        assert len(terms) == len(kk)


def test_the_flip_list_is_sorted_updates_first_then_by_row():
    """The order the rank-1 changes are applied in does not depend on the order the atomics
    listed them: updates (+) before downdates (-), each by row, exactly (row indices near 1e8
    would tie in float32 arithmetic; the comparison does none)."""
    cap = 64
    sort = sort_func(cap)

    @wp.kernel
    def run(vals: wp.array[float], n: int, out: wp.array[float]):
        sh = wp.tile_empty(shape=cap, dtype=float, storage="shared")
        for i in range(n):
            sh[3 + i] = vals[i]
        sort(sh, 3, n)
        for i in range(n):
            out[i] = sh[3 + i]

    rng = np.random.default_rng(0)
    cases = [np.array([-3, -1, -2, 5, 4], np.float32)]  # neighbouring downdates: float keys would tie
    for n in (0, 1, 2, 8):
        rows = rng.choice(np.arange(1, 5000), n, replace=False)
        cases.append((rows * rng.choice([-1, 1], n)).astype(np.float32))
    for vals in cases:
        n = len(vals)
        out = wp.zeros(max(n, 1), dtype=float, device="cpu")
        wp.launch_tiled(run, dim=(1,), inputs=[wp.array(np.r_[vals, [0.0]], dtype=float, device="cpu"), n],
                        outputs=[out], block_dim=1, device="cpu")
        want = sorted(vals.tolist(), key=lambda v: (v < 0, abs(v)))
        assert out.numpy()[:n].tolist() == want, (vals, out.numpy())


@pytest.mark.gpu
@pytest.mark.skipif(not wp.is_cuda_available(), reason="needs a CUDA GPU (runs in the recorded GPU check)")
@pytest.mark.parametrize("name", ["simple", "muscular-fast", "tree"])
def test_cuda_rank1_path_stays_near_mujoco_warp(name):
    """On CUDA, where a block's 64 threads really run at once (the CPU's fibers switch only at
    barriers, so a missing barrier cannot show there), over 64 worlds × 3 seeds: updates taken,
    every row's state and each world's iteration count MuJoCo Warp's, and the errors against
    float64 within 10 × MuJoCo Warp's own. Not the CPU tests' 3 ×: on an H100 muscular-fast's
    updated factor gave efc_force 2.4e-4 against MuJoCo Warp's 5.7e-5 (4.2 ×), qacc 2.8 ×, and in
    another state a line search's LS_ITERATIONS bit that MuJoCo Warp's did not set (the update's
    rounding, which a refactorization does not carry; bench/NOTES.md). The switch is
    off by default for that and for its speed."""
    mjm, slots = newton_model(name)
    for seed in range(3):
        e = NM.solve_errors(mjm, nworld=64, seed=seed, device="cuda:0", slots=slots, noise=0.2, nsteps=5,
                            fixes=UPDATE + ("matvec",), stage_clock=True)
        for k in ("qacc", "efc_force", "qfrc_constraint"):
            assert e[f"{k}_new_f64"] <= max(10.0 * e[f"{k}_stock_f64"], TOL), (k, e)
        assert e["state_diff_new_stock"] == 0 and e["niter_equal"], e
        assert sum(e["counts"]["updates"]) > 0, e["counts"]
