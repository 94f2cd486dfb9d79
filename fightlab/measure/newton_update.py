"""A rank-1 up/downdate of the Newton Hessian's tree-sparse LDLᵀ, as a float64/float32 numpy
reference of the kernel's (:mod:`fightlab.kernels.newton_rank1`, the switch "update").

MuJoCo Warp's Newton solve (and fightlab's single launch, :mod:`fightlab.kernels.newton`)
refactors H = M + Σ D·JᵀJ after a step whenever a constraint row changed state: the factor is
most of the single launch's cycles, and most refactorizations follow ≤ 4 flipped rows
(bench/NOTES.md, "How many rows flip between factorizations"). A flipped row r changes H by
σ·D_r·J_rᵀJ_r (σ = +1 when it became quadratic, -1 when it left), a rank-1 change whose vector
J_r lies on one root-to-body chain (:func:`fightlab.kernels.newton_tree.rows_are_chains`). The
update of the leaf-first factor (Gill, Golub, Murray and Saunders 1974, "Methods for modifying
matrix factorizations", Math. Comp. 28, method C1) then visits only that chain's DOFs, leaf to
root, each step changing the step DOF's row at its ancestors: as many serial steps as the chain
is long (≤ the tree's depth: 25 muscular-fast, 19 simple), where a refactorization takes nv
(89 / 43) steps with up to n(n+1)/2 items each.

Storage is the kernel's (:mod:`fightlab.kernels.newton_tree`): after eliminating DOF k, row k
holds its pivot row unscaled, ``R[k, k]`` = d_k and ``R[k, a]`` = d_k·L[k, a] for the ancestors a
of k, so H = Σ_k R[k]ᵀR[k] / d_k (rows as vectors over the DOFs). Inputs: dense ``(nv, nv)``
arrays (lower triangle used), ``dof_parent`` ``(nv,)`` int (MuJoCo's ``dof_parentid``, -1 at
the root). A downdate whose pivot falls below ``rtol`` times its old value is refused
(``ok`` False): the caller refactors.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ancestors", "tree_ldl", "ldl_matrix", "rank1_update", "chain_steps"]


def _check_parent(dof_parent: np.ndarray) -> np.ndarray:
    """``dof_parent`` as int, checked: one dimension, each parent -1 or a lower DOF (MuJoCo's
    order: a parent precedes its children), else ValueError."""
    par = np.asarray(dof_parent)
    if par.ndim != 1 or not np.issubdtype(par.dtype, np.integer):
        raise ValueError(f"dof_parent must be a 1-d int array, got shape {par.shape} dtype {par.dtype}")
    bad = [k for k, p in enumerate(par) if not -1 <= int(p) < k]
    if bad:
        raise ValueError(f"dof_parent[{bad[0]}] = {int(par[bad[0]])}: a parent must be -1 or a lower DOF")
    return par


def _check_matrix(A: np.ndarray, nv: int, name: str) -> None:
    if A.shape != (nv, nv) or A.dtype not in (np.float32, np.float64):
        raise ValueError(f"{name} must be float32 or float64 of shape ({nv}, {nv}), got {A.dtype} {A.shape}")


def ancestors(dof_parent: np.ndarray) -> list[list[int]]:
    """Per DOF, its ancestor DOFs nearest first (``dof_parent`` ``(nv,)`` int, -1 at a root;
    ValueError unless each parent is -1 or a lower DOF)."""
    dof_parent = _check_parent(dof_parent)
    out = []
    for k in range(len(dof_parent)):
        a, chain = int(dof_parent[k]), []
        while a >= 0:
            chain.append(a)
            a = int(dof_parent[a])
        out.append(chain)
    return out


def tree_ldl(H: np.ndarray, dof_parent: np.ndarray) -> np.ndarray:
    """The kernel's leaf-first factor of symmetric ``H`` ``(nv, nv)`` with M's ancestor sparsity
    (no fill): ``R`` ``(nv, nv)`` lower, in ``H``'s dtype (float32 or float64); ValueError when a
    pivot is not > 0 or an input is malformed."""
    anc = ancestors(dof_parent)
    R = np.tril(np.array(H, copy=True))
    _check_matrix(R, len(anc), "H")
    for k in range(len(R) - 1, -1, -1):
        d = R[k, k]
        if not d > 0:
            raise ValueError(f"pivot {k} is {d}: H is not positive definite on the tree")
        for i, a in enumerate(anc[k]):
            for b in anc[k][i:]:  # b is an ancestor of a (or a itself): entry (a, b), a > b
                R[a, b] -= R[k, a] * R[k, b] / d
    return R


def ldl_matrix(R: np.ndarray, dof_parent: np.ndarray) -> np.ndarray:
    """H = Σ_k R[k]ᵀR[k] / d_k from the factor ``R`` (symmetric ``(nv, nv)``, float64)."""
    anc = ancestors(dof_parent)
    H = np.zeros(R.shape)
    for k in range(len(R)):
        idx = [k] + anc[k]
        r = np.array([R[k, k]] + [R[k, a] for a in anc[k]], dtype=np.float64)
        H[np.ix_(idx, idx)] += np.outer(r, r) / float(R[k, k])
    return H


def rank1_update(R: np.ndarray, w: np.ndarray, sigma: float, dof_parent: np.ndarray,
                 rtol: float = 1e-3) -> tuple[np.ndarray, bool, int]:
    """The factor of H + σ·w·wᵀ from ``R`` (H's, :func:`tree_ldl`), ``w`` ``(nv,)`` on one chain
    (its DOFs and their ancestors; ``sigma`` > 0 an update, < 0 a downdate), in ``R``'s dtype.
    Returns (R', ok, steps): ok False when a new pivot is ≤ ``rtol`` × its old one (the caller
    refactors; R' is then incomplete); steps: the serial steps taken, one per DOF where w was
    nonzero on arrival (leaf to root: in the kernel one barrier each, the ancestors in parallel).
    ValueError for malformed inputs, ``rtol`` outside [0, 1), or a ``w`` off one chain (its
    nonzero DOFs not all on the deepest one's path to the root: the update would need fill)."""
    anc = ancestors(dof_parent)
    R = np.array(R, copy=True)
    _check_matrix(R, len(anc), "R")
    w = np.asarray(w)
    if w.shape != (len(anc),):
        raise ValueError(f"w must have shape ({len(anc)},), got {w.shape}")
    if not 0.0 <= rtol < 1.0:
        raise ValueError(f"rtol must be in [0, 1), got {rtol}")
    nz = np.flatnonzero(w)
    if len(nz) and not set(nz.tolist()) <= {int(nz[-1]), *anc[int(nz[-1])]}:
        raise ValueError(f"w is not on one root-to-DOF chain (nonzero at DOFs {nz.tolist()})")
    w = np.array(w, dtype=R.dtype, copy=True)
    s, steps = R.dtype.type(sigma), 0
    for k in range(len(R) - 1, -1, -1):
        p = w[k]
        if p == 0:
            continue
        steps += 1
        d = R[k, k]
        d_new = d + s * p * p
        if not d_new > rtol * d:
            return R, False, steps
        beta = s * p / d_new
        s = s * d / d_new
        for a in anc[k]:
            l_ka = R[k, a] / d
            w[a] -= p * l_ka
            R[k, a] = (l_ka + beta * w[a]) * d_new
        R[k, k] = d_new
    return R, True, steps


def chain_steps(J_row: np.ndarray, dof_parent: np.ndarray) -> int:
    """Serial steps of :func:`rank1_update` for one constraint row ``J_row`` ``(nv,)``: the
    DOFs of its chain (its nonzero DOFs and every ancestor of them)."""
    anc = ancestors(dof_parent)
    chain = set()
    for k in np.flatnonzero(J_row):
        chain.add(int(k))
        chain.update(anc[k])
    return len(chain)
