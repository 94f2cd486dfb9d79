"""The rank-1 up/downdate of the tree-sparse LDLᵀ (`fightlab.measure.newton_update`) against a
fresh factorization, on a fightlab body's mass matrix with rows on its root-to-body chains."""

import mujoco
import numpy as np
import pytest

from fightlab.bodies import build
from fightlab.measure import newton_update as U


@pytest.fixture(scope="module")
def simple_M():
    mjm = build("simple")
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
