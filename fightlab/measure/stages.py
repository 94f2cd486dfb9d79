"""The kernel name -> stage table of :mod:`fightlab.measure.profile` (re-exported there).

A kernel's stage: ``KERNEL_STAGES`` (exact keys, from the MuJoCo Warp 4.0.0 functions that
launch them, and fightlab's env kernels), then ``MODULE_STAGES`` (its module), else "other";
more than ``OTHER_LIMIT`` of GPU kernel time in "other" is a failure (``check_other``).
``factor_kind`` names the mass-matrix factor path a step's launches took.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

import pandas as pd

#: the stages, in pipeline order; "env" is fightlab's own env kernels (only in ``what="env"``)
STAGES: tuple[str, ...] = (
    "kinematics", "inertia", "mass-matrix factor", "forces", "broadphase", "narrowphase",
    "constraint build", "constraint solve", "integration", "env", "other",
)
#: what each stage holds (printed under the stage chart)
STAGE_DOC: dict[str, str] = {
    "kinematics": "body/geom poses, com, cdof, actuator transmission, com velocities, tendon/actuator "
                  "velocities, position/velocity sensors",
    "inertia": "composite rigid-body inertia and the joint-space mass matrix M (cinert, crb, M)",
    "mass-matrix factor": "LDLᵀ/Cholesky of M (and of M + h·D in the Euler step) with its triangular "
                          "solves: sparse per-level kernels (_qLD_acc, one launch per tree level) or "
                          "the dense tile Cholesky (fused factor + solve)",
    "forces": "bias forces (RNE), passive springs/damping/gravity, actuator forces, applied forces, "
              "qfrc_smooth, force/acceleration sensors",
    "broadphase": "candidate geom pairs (nxn or sweep-and-prune)",
    "narrowphase": "contact points of the candidate pairs (primitive, convex GJK/EPA, sdf)",
    "constraint build": "constraint rows: limits, friction loss, equality, contact Jacobians",
    "constraint solve": "Newton solver: init, gradient, Hessian JᵀDJ + M and its Cholesky (not "
                        "the mass-matrix factor), line search, M·x products, qfrc_constraint",
    "integration": "Euler damping terms, next velocity/position/activation/time",
    "env": "fightlab env kernels (actions, pushes, contact check, reward, reset, observation) and "
           "MuJoCo Warp's masked reset_data",
    "other": "kernels the table does not know (must stay under 2 % of kernel time)",
}

_K = "__locals__kernel"
#: key of fightlab's single-launch tree factor, "shared" variant (a kernel built per staging size
#: inside ``fightlab.kernels.factor._shared_kernel``, hence the closure name)
TREE_FACTOR_SHARED = "_shared_kernel__locals___factor_tree_shared"
#: key of fightlab's single-launch Newton solve (``fightlab.kernels.newton``, a kernel per
#: shared-memory size built inside ``_kernel``; training's default on a GPU)
NEWTON_KERNEL = "_kernel__locals___newton"
#: exact kernel key (warp ``Kernel.key``; CUDA timing names add a prefix and a hash) -> stage
KERNEL_STAGES: dict[str, str] = {}
_TABLE: dict[str, tuple[str, ...]] = {
    "kinematics": (
        # smooth.kinematics, com_pos, camlight, flex, transmission, com_vel; forward velocities
        "_kinematics_branch", "_compute_body_matrices", "_compute_body_inertial_frames",
        "_geom_local_to_global", "_site_local_to_global", "_subtree_com", "_subtree_com_world",
        "_cdof", "_cam_local_to_global", "_light_local_to_global", "_flex_nodes", "_flex_vertices",
        "_flex_edges", "_flex_face_kinematics", "_transmission" + _K, "_comvel_root",
        "_comvel_branch", "_tendon_dot", "_tendon_velocity", "_actuator_velocity",
        # sensor.sensor_pos / sensor_vel (size 0 for bodies without sensors: never launched)
        "_sensor_pos", "_limit_pos", "_sensor_vel", "_limit_vel",
    ),
    "inertia": ("_cinert", "_crb_subtree", "_M", "_tendon_armature" + _K),
    "mass-matrix factor": (
        # smooth.factor_m / solve_m (sparse: per-level LDLᵀ; dense: tile Cholesky) and the Euler
        # step's factor of M + h·D
        "_qLD_acc" + _K, "_qLDiag_div", "_solve_LD_sparse_fused" + _K,
        "_solve_LD_sparse_level" + _K, "_solve_LD_sparse_diag", "_solve_LD_sparse_copy",
        "_tile_cholesky_factorize_solve_block" + _K, "_tile_cholesky_factorize" + _K,
        "_tile_cholesky_solve" + _K, "_copy_CSR", "_factor_solve_lu_sparse_fused" + _K,
        # fightlab.kernels.factor: the single-launch tree LDLᵀ (default for trees over 64 DOF),
        # "shared" variant (the default when it fits) and "global" variant
        TREE_FACTOR_SHARED, "_factor_tree",
    ),
    "forces": (
        # smooth.rne, tendon_bias; passive; forward.fwd_actuation / fwd_acceleration; support
        "_cacc_world", "_cacc_branch", "_cfrc", "_cfrc_subtree", "_cfrc_world", "_qfrc_bias",
        "_tendon_bias_coef" + _K, "_tendon_bias_qfrc" + _K, "_spring_damper_dof_passive",
        "_spring_damper_flexedge_passive" + _K, "_flex_elasticity" + _K, "_flex_bending" + _K,
        "_flex_passive_bend_interp" + _K, "_gravity_force" + _K, "_qfrc_passive_kernel" + _K,
        "_actuator_force", "_qfrc_actuator" + _K, "_qfrc_actuator_gravcomp_limits",
        "_qfrc_smooth" + _K, "_apply_ft",
        # sensor.sensor_acc (size 0 without sensors)
        "_sensor_acc", "_sensor_touch" + _K, "_limit_frc", "_tendon_actuator_force" + _K,
        "_tendon_actuator_force_cutoff",
    ),
    "broadphase": ("_nxn_broadphase" + _K, "_sap_project__locals__sap_project",
                   "_sap_pair_margin__locals__sap_pair_margin", "_sap_broadphase" + _K,
                   "_segmented_sort__locals__segmented_sort"),
    "narrowphase": ("_primitive_narrowphase__locals__primitive_narrowphase",),
    "constraint build": (
        "_zero_constraint_counts", "_equality_connect" + _K, "_equality_weld" + _K,
        "_equality_joint" + _K, "_equality_tendon" + _K, "_friction_dof" + _K,
        "_friction_tendon" + _K, "_limit_ball" + _K, "_limit_slide_hinge" + _K,
        "_limit_tendon" + _K, "_efc_contact_init" + _K, "_efc_contact_jac_sparse" + _K,
        "_efc_contact_update" + _K, "_efc_nnz_overflow" + _K,
    ),
    "constraint solve": (
        "_solve_init_dof" + _K, "_inertia_scale", "_solve_init_efc", "_solve_init_jaref_kernel" + _K,
        "_update_constraint_efc" + _K, "_zero_qfrc_constraint_sparse",
        "_update_constraint_init_qfrc_constraint_sparse" + _K, "_update_gradient_zero_grad_dot" + _K,
        "_update_gradient_grad" + _K, "_update_gradient_init_h_sparse" + _K, "_JTDACJ_sparse" + _K,
        "_update_gradient_cholesky_blocked" + _K,                    # Newton Hessian factor
        "_update_gradient_cholesky_blocked_skip_unchanged" + _K,     # (not the mass matrix)
        "_update_gradient_h_incremental_sparse" + _K, "_linesearch_jv_fused_kernel" + _K,
        "_linesearch_iterative_kernel" + _K, "_zero_change_counters", "_solve_done" + _K,
        "_qfrc_constraint_from_grad", "mul_m_kernel__locals___mul_m",
        NEWTON_KERNEL,  # fightlab.kernels.newton: the whole solve in one launch
    ),
    "integration": (
        "_compute_damping_deriv", "_euler_damp_qfrc", "_next_activation", "_next_velocity",
        "_next_position", "_next_time_builder__locals___next_time",
    ),
    "env": (
        # fightlab.envs.stance_kernels, fightlab.envs.reset (the masked reset in one launch)
        "pre_step", "contact_check", "post_step", "reset_worlds", "observe", "observe_privileged",
        "reset_data_and_task",
        "reset_data__locals__reset_xfrc_applied", "reset_data__locals__reset_M",
        "reset_data__locals__reset_mocap", "reset_data__locals__reset_contact",
        "reset_data__locals__reset_sleep", "reset_data__locals__reset_nworld",
    ),
}
for _stage, _keys in _TABLE.items():
    for _key in _keys:
        assert _key not in KERNEL_STAGES, f"{_key} listed twice"
        KERNEL_STAGES[_key] = _stage

#: fallback by the module a kernel is defined in (kernels not in KERNEL_STAGES)
MODULE_STAGES: dict[str, str] = {
    **{f"mujoco_warp._src.collision_{m}": "narrowphase" for m in ("primitive", "convex", "gjk", "sdf", "flex")},
    "mujoco_warp._src.constraint": "constraint build", "mujoco_warp._src.solver": "constraint solve",
    "mujoco_warp._src.passive": "forces", "mujoco_warp._src.io": "env", "fightlab.envs.stance_kernels": "env",
}

#: more than this share of kernel time in "other" fails a GPU run (the table has a gap)
OTHER_LIMIT = 0.02


_CUDA_NAME = re.compile(r"^(?:forward kernel|backward kernel|builtin kernel)\s+")
_HASH = re.compile(r"_[0-9a-f]{8}$")


def stage_slug(stage: str) -> str:
    """Column-name form of a stage: "mass-matrix factor" -> "mass_matrix_factor"."""
    return re.sub(r"[^a-z0-9]+", "_", stage.lower()).strip("_")


def kernel_key(name: str) -> str:
    """Warp kernel key of a timing record name: strips warp's "forward kernel " prefix and the
    8-hex-digit module hash suffix ("forward kernel _cinert_1a2b3c4d" -> "_cinert")."""
    return _HASH.sub("", _CUDA_NAME.sub("", name))


def stage_of(key: str, module: str | None = None) -> str:
    """Stage of kernel ``key``: ``KERNEL_STAGES``, else ``MODULE_STAGES[module]``, else "other"."""
    key = kernel_key(key)
    if key in KERNEL_STAGES:
        return KERNEL_STAGES[key]
    if module and module in MODULE_STAGES:
        return MODULE_STAGES[module]
    return "other"


def check_other(by_stage: pd.DataFrame, by_kernel: pd.DataFrame | None = None,
                limit: float = OTHER_LIMIT) -> list[str]:
    """Failures of the name->stage table: "other" holding more than ``limit`` of kernel time, as
    messages giving the share and, with ``by_kernel``, the kernels that fell to "other" (to add
    to ``KERNEL_STAGES``); empty when fine or untimed (the CPU)."""
    row = by_stage.set_index("stage").loc["other"]
    share = float(row["share"])
    if math.isnan(share) or share <= limit:
        return []
    names = ""
    if by_kernel is not None:
        oth = by_kernel[by_kernel["stage"] == "other"].head(10)
        names = "; kernels: " + ", ".join(f"{k} ({s:.1%})" for k, s in zip(oth["kernel"], oth["share"]))
    return [f"other: {share:.1%} of kernel time > {limit:.0%} (the stage table misses kernels){names}"]


def unmapped(keys: Iterable[str], modules: dict[str, str] | None = None) -> list[str]:
    """The kernel keys that ``stage_of`` puts in "other" (what a complete table must not have)."""
    modules = modules or {}
    return sorted({k for k in keys if stage_of(k, modules.get(k)) == "other"})


def cuda_base_name(name: str) -> str:
    """A timing record's name without warp's "forward kernel " prefix (the mangled name: key + hash)."""
    return _CUDA_NAME.sub("", name)


def factor_kind(launches: Iterable[str]) -> str:
    """Which mass-matrix factor a step's kernel keys show: "tree" (fightlab's single-launch
    kernel), "sparse" (MuJoCo Warp's per-level LDLᵀ), "dense" (tile Cholesky), "+"-joined when
    several ran, "none" when none did."""
    launches = set(launches)
    kinds = [k for k, hit in (("tree", "_factor_tree" in launches or TREE_FACTOR_SHARED in launches),
                              ("sparse", "_qLD_acc" + _K in launches),
                              ("dense", any("tile_cholesky" in k for k in launches))) if hit]
    return "+".join(kinds) or "none"
