"""The rank-1 up/downdate of the tree-sparse LDLᵀ (`fightlab.measure.newton_update`) against a
fresh factorization, on a fightlab body's mass matrix with rows on its root-to-body chains."""

import mujoco
import numpy as np
import pytest

from fightlab.bodies import build
from fightlab.measure import newton_update as U


@pytest.fixture(scope="module", params=["simple", "muscular-fast"])
def simple_M(request):
    mjm = build(request.param)
    d = mujoco.MjData(mjm)
    d.qpos[:] = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    mujoco.mj_forward(mjm, d)
    M = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, d, M)
    return M, mjm.dof_parentid.copy()


def _chain_row(dof_parent, k, rng):
    """A row like a contact's Jacobian row: nonzero on DOF k and every ancestor of it."""
    w = np.zeros(len(dof_parent))
    for a in [k] + U.ancestors(dof_parent)[k]:
        w[a] = rng.normal()
    return w


def test_the_factor_rebuilds_H_and_keeps_the_trees_sparsity(simple_M):
    M, par = simple_M
    R = U.tree_ldl(M, par)
    np.testing.assert_allclose(U.ldl_matrix(R, par), M, rtol=0, atol=1e-12 * np.abs(M).max())
    anc = U.ancestors(par)
    off = [(k, a) for k in range(len(M)) for a in range(k) if a not in anc[k]]
    assert off and all(R[k, a] == M[k, a] for k, a in off)  # never written: no fill
    with pytest.raises(ValueError, match="pivot .* is not positive definite"):
        U.tree_ldl(-M, par)
    Z = M.copy()
    Z[-1, :] = Z[:, -1] = 0.0
    with pytest.raises(ValueError, match=f"pivot {len(M) - 1} is 0.0"):
        U.tree_ldl(Z, par)


@pytest.mark.parametrize("sigma", [1.0, -1.0])
def test_an_update_equals_the_factor_of_the_changed_matrix(simple_M, sigma):
    """H ± w·wᵀ for rows on a chain: the same factor as a fresh factorization (float64 rounding),
    in as many serial steps as the chain has DOFs; a downdate removes a row added before."""
    M, par = simple_M
    rng = np.random.default_rng(1)
    anc = U.ancestors(par)
    for k in rng.choice(len(M), 8, replace=False):
        w = _chain_row(par, k, rng) * 0.3
        base = M + np.outer(w, w) if sigma < 0 else M  # a downdate removes what is there
        R = U.tree_ldl(base, par)
        R2, ok, steps = U.rank1_update(R, w, sigma, par)
        want = U.tree_ldl(base + sigma * np.outer(w, w), par)
        assert ok and steps == 1 + len(anc[k]) == U.chain_steps(w, par)
        assert np.abs(R2 - want).max() <= 1e-12 * np.abs(want).max()


def test_float32_updates_stay_within_rounding_and_an_indefinite_downdate_is_refused(simple_M):
    M, par = simple_M
    rng = np.random.default_rng(2)
    w = _chain_row(par, len(M) - 1, rng)
    H = M + np.outer(w, w)
    R32 = U.tree_ldl(H.astype(np.float32), par)
    R2, ok, _ = U.rank1_update(R32, w.astype(np.float32), -1.0, par)
    assert ok and R2.dtype == np.float32
    assert np.abs(U.ldl_matrix(R2, par) - M).max() <= 1e-5 * np.abs(H).max()
    _, ok, _ = U.rank1_update(U.tree_ldl(M, par), 10.0 * w, -1.0, par)  # M - 100 w·wᵀ: not definite
    assert not ok


def test_a_leaf_only_row_fills_its_whole_chain_and_a_falling_pivot_is_refused(simple_M):
    """A row nonzero at one leaf DOF only: its update runs through every ancestor (fill along the
    chain), as `chain_steps` says; a downdate that keeps H definite but drops a pivot below
    ``rtol`` of its old value is refused, accepted with rtol 0."""
    M, par = simple_M
    k = len(M) - 1
    w = np.zeros(len(M))
    w[k] = 3.0 * np.sqrt(M[k, k])
    R = U.tree_ldl(M + np.outer(w, w), par)
    R2, ok, steps = U.rank1_update(R, w, -1.0, par, rtol=0.0)
    assert ok and steps == U.chain_steps(w, par) == 1 + len(U.ancestors(par)[k])
    assert np.abs(R2 - U.tree_ldl(M, par)).max() <= 1e-10 * np.abs(M).max()
    _, ok, steps = U.rank1_update(R, w, -1.0, par, rtol=0.5)  # the leaf's pivot falls 10×
    assert not ok and steps == 1


def test_malformed_inputs_are_refused(simple_M):
    M, par = simple_M
    R = U.tree_ldl(M, par)
    anc = U.ancestors(par)
    b = len(M) - 1
    a = max(k for k in range(b) if k not in anc[b])  # on another branch than the last DOF
    two = np.zeros(len(M))
    two[[a, b]] = 1.0  # two DOFs on different branches
    cases = [(lambda: U.rank1_update(R, two, 1.0, par), "not on one root-to-DOF chain"),
             (lambda: U.rank1_update(R, np.ones(len(M) + 1), 1.0, par), "w must have shape"),
             (lambda: U.rank1_update(R[:, :-1], two, 1.0, par), "R must be float32 or float64"),
             (lambda: U.rank1_update(R.astype(int), two, 1.0, par), "R must be float32 or float64"),
             (lambda: U.rank1_update(R, two, 1.0, par, rtol=-1.0), "rtol must be in"),
             (lambda: U.ancestors(np.array([-1, 2, 1])), r"dof_parent\[1\] = 2"),
             (lambda: U.ancestors(np.array([-1, 1])), r"dof_parent\[1\] = 1"),
             (lambda: U.tree_ldl(M, par[:-1]), "H must be")]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
