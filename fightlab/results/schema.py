"""The schema of result rows: the metadata columns, each experiment's metric columns (with their
units), and how an experiment is registered; :func:`results_path` names its file."""

from __future__ import annotations

import re
from pathlib import Path

#: metadata columns, first in every result file, in this order
META_COLUMNS: tuple[str, ...] = (
    "run_id", "time", "commit", "host", "gpu", "driver", "warp", "mujoco_warp", "torch",
    "body", "nworld", "seed", "params",
)

#: metadata columns holding integers, and those holding text (read back as str, "" stays "")
_META_INT = ("nworld", "seed")
_META_STR = tuple(c for c in META_COLUMNS if c not in _META_INT)

#: a train row's reference check (`fightlab.run.reference`; empty for a run that did not solve):
#: passed (bool), its seconds (apart from the time to solve), each run's fall rate and tracking
REFERENCE_COLUMNS = ("reference_passed", "reference_eval_s", "reference_fall_rate_dt", "reference_tracking_dt",
                     "reference_fall_rate_half_dt", "reference_tracking_half_dt")

#: metric columns per experiment (after the metadata columns, in this order)
EXPERIMENTS: dict[str, tuple[str, ...]] = {
    # peak_gpu_mem_mib: the run's peak device memory [MiB], warp's memory-pool high-water mark plus
    # torch's peak reserved memory (`measure.report.peak_gpu_mem_mib`); empty on the CPU device
    "train": (
        "time_to_solve_s", "iterations", "compile_s", "env_steps_per_s", "physics_steps_per_s",
        "rollout_s_per_iter", "update_s_per_iter", "solved", "final_amplitude", "fall_rate",
        "mean_episode_s", "overflow_count", "nan_resets", "host_reads_per_iter", "graph_fallbacks",
        "tracking", "tracking_survived", *REFERENCE_COLUMNS, "peak_gpu_mem_mib",
    ),
    # seconds per training iteration with and without each graph, and the parts of a rollout
    # step timed apart (fightlab.measure.graphs); flags 1/0, shares in [0, 1]; rows whose params
    # lack split_state have no env_extra/policy/measured columns
    "graphs": (
        "env_graph", "policy_graph", "update_graph", "iterations", "s_per_iter",
        "rollout_s_per_iter", "update_s_per_iter", "host_reads_per_iter", "graph_fallbacks",
        "physics_ms_per_step", "env_step_ms_per_step", "rollout_ms_per_step", "non_physics_share",
        "env_non_physics_share", "env_extra_ms_per_step", "policy_ms_per_step",
        "measured_non_physics_share",
    ),
    # K trainings packed per GPU on `gpus` GPUs (fightlab.measure.packing, from a batch folder):
    # the median over its trainings of each one's median seconds per iteration, and K × gpus /
    # that median [it/s, all GPUs]; gpus empty in rows from before it was recorded (one GPU);
    # solves_per_hour: trainings solved / the batch's wall-clock hours (empty: none solved, or
    # a resumed batch whose span is not one stretch)
    "packing": (
        "concurrent", "mps", "runs", "s_per_iter", "it_per_s_aggregate", "s_per_iter_min",
        "s_per_iter_max", "gpus", "solves_per_hour",
    ),
    # the world-count sweep (fightlab.measure.sweep): one short solo training per (body, nworld);
    # medians over its timed iterations (s_per_iter: host wall clock; its min / max); env
    # steps/s = nworld × num_steps / s_per_iter; compile_s = warm-up and capture
    "sweep": (
        "iterations", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "env_steps_per_s",
        "host_reads_per_iter", "graph_fallbacks", "compile_s", "s_per_iter_min", "s_per_iter_max",
    ),
    # the CPU baseline vs MuJoCo Warp (fightlab.measure.backends): one short solo training per
    # (body, backend), medians as in "sweep"; physics steps/s = env steps/s × substeps; ratios
    # over the CPU backend's row of the same body and comparison; same_state_*_err: max abs
    # difference after one env step from the same state, CPU backend vs MuJoCo Warp, in the
    # quantity's units (qpos: m / rad / quaternion, qvel: m/s / rad/s, obs, reward per env
    # step); ulp_*_sensitivity: MuJoCo Warp's own change under a 1-ulp change of the state
    "backends": (
        "iterations", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "env_steps_per_s",
        "physics_steps_per_s", "host_reads_per_iter", "graph_fallbacks", "compile_s",
        "s_per_iter_min", "s_per_iter_max", "env_steps_ratio_vs_cpu_backend",
        "s_per_iter_ratio_vs_cpu_backend", "same_state_qpos_err", "same_state_qvel_err",
        "same_state_obs_err", "same_state_reward_err", "ulp_qpos_sensitivity",
        "ulp_qvel_sensitivity",
    ),
    # fightlab.measure.bench: one row per body on the machine it ran on; ok 1/0 (params.reason
    # says why not); set-up phases apart (install_s from the launcher, compile_s, first_iter_s);
    # the speed test's medians (as "sweep"); expected_env_steps_per_s from earlier rows of the
    # same GPU (empty: none); estimated_time_to_solve_s = committed iterations to solve ×
    # train_s_per_iter (params.estimate.basis says which iterations); CUDA versions as 12.8;
    # bandwidth_mb_per_s in 10^6 bytes/s (empty: not measured)
    "bench": (
        "ok", "install_s", "compile_s", "first_iter_s", "speed_iterations", "s_per_iter",
        "rollout_s_per_iter", "update_s_per_iter", "env_steps_per_s", "expected_env_steps_per_s",
        "speed_ratio_vs_expected", "train_budget_s", "train_iterations", "train_wall_s",
        "train_s_per_iter", "iterations_to_solve_reference", "estimated_time_to_solve_s",
        "cuda_driver_version", "cuda_toolkit_version", "cpu_cores", "bandwidth_mb_per_s",
        "time_limit_s", "job_wall_s",
    ),
    # the main job (fightlab.reproduce): one row per notebook; params.notebook / size / job;
    # wall_s under papermill, kernel start included; ok 1/0; gpu_mem_peak_mib (every process,
    # nvidia-smi every 0.5 s; empty on a CPU); figures_drawn (PNG), figures_differ (not
    # byte-identical to the committed figure of the same name)
    "reproduce": (
        "wall_s", "ok", "gpu_mem_peak_mib", "figures_drawn", "figures_differ",
    ),
    # contacts / constraint rows per world of bodies pushed over (fightlab.bodies.describe)
    "slots": (
        "seconds", "ncon_max", "ncon_p99", "nefc_max", "nefc_p99", "nconmax", "njmax",
    ),
    # a policy (or the zero-action policy) re-run on fresh worlds (fightlab.run.evaluate.evaluate);
    # params holds the checkpoint and its training run_id
    "evaluate": (
        "zero_action", "timestep_s", "amplitude", "episodes", "fall_rate", "tracking",
        "mean_episode_s", "overflow_count", "nan_resets", "tracking_survived",
    ),
    # per-kernel GPU time of uncaptured physics steps by stage (fightlab.measure.profile's
    # row_metrics()), per physics step; *_share of kernel time; launch_overhead = graph - kernels
    "profile": (
        "nstep", "launches_per_step", "kernel_ms_per_step", "graph_ms_per_step",
        "uncaptured_ms_per_step", "launch_overhead_ms_per_step", "physics_steps_per_s",
        "kinematics_ms_per_step", "inertia_ms_per_step", "mass_matrix_factor_ms_per_step",
        "forces_ms_per_step", "broadphase_ms_per_step", "narrowphase_ms_per_step",
        "constraint_build_ms_per_step", "constraint_solve_ms_per_step", "integration_ms_per_step",
        "env_ms_per_step", "other_ms_per_step", "kinematics_launches_per_step",
        "inertia_launches_per_step", "mass_matrix_factor_launches_per_step",
        "forces_launches_per_step", "broadphase_launches_per_step", "narrowphase_launches_per_step",
        "constraint_build_launches_per_step", "constraint_solve_launches_per_step",
        "integration_launches_per_step", "env_launches_per_step", "other_launches_per_step",
        "mass_matrix_factor_share", "other_share",
    ),
    # the GPU primer (fightlab.measure.primer): bandwidth at the largest vector size, launch
    # floor, Mandelbrot compile / first / steady apart, CNN step; *_gpu empty on a CPU; body "none"
    "primer": (
        "vector_n", "copy_gb_per_s_cpu", "vec_add_gb_per_s_cpu", "saxpy_gb_per_s_cpu",
        "numpy_saxpy_gb_per_s", "copy_gb_per_s_gpu", "vec_add_gb_per_s_gpu", "saxpy_gb_per_s_gpu",
        "empty_launch_us_cpu", "empty_launch_us_gpu", "mandelbrot_pixels", "mandelbrot_numpy_s",
        "mandelbrot_compile_s_cpu", "mandelbrot_first_s_cpu", "mandelbrot_steady_s_cpu",
        "mandelbrot_compile_s_gpu", "mandelbrot_first_s_gpu", "mandelbrot_steady_s_gpu",
        "mandelbrot_unsynced_s_gpu", "mandelbrot_image_match_gpu", "cnn_batch", "cnn_image_px",
        "cnn_step_s_cpu", "cnn_step_s_gpu", "cnn_unsynced_step_s_gpu", "cnn_test_accuracy_cpu",
        "cnn_test_accuracy_gpu",
    ),
    # single-launch tree LDL vs the stock per-level sparse factor (fightlab.kernels.factor):
    # times for all nworld worlds together; *_rel_err normwise relative errors (unitless);
    # *_f64 / *_ulp: the float32 rounding scale (stock vs float64, stock vs a 1-ulp state)
    "factor": (
        "nv", "levels", "factor_calls_per_step", "inner_calls", "stock_us_per_call",
        "tree_us_per_call", "tree_global_us_per_call", "dense_us_per_call", "stock_factor_ms_per_step",
        "tree_factor_ms_per_step", "dense_factor_ms_per_step", "speedup_vs_stock",
        "step_stock_us", "step_tree_us", "graph", "qld_rel_err", "qldiaginv_rel_err",
        "qld_rel_err_stock_f64", "qacc_rel_err", "qacc_rel_err_ulp", "traj_steps",
        "traj_dev_tree_rad", "traj_dev_ulp_rad", "traj_nan", "traj_overflow_worlds",
        "traj_pushes", "traj_quiet_dev_tree_rad", "traj_quiet_dev_ulp_rad",
    ),
    # two versions of fightlab on one GPU, run alternately (bench/seconds_per_iteration_ab.sh),
    # medians as in "sweep"; after 1 for the script's checkout, 0 for the other (params.code_commit)
    "versions": (
        "after", "iterations", "s_per_iter", "rollout_s_per_iter",
        "update_s_per_iter", "host_reads_per_iter",
    ),
    # seconds per training iteration of each learner on the task (bench/learner_speed.sh: `train
    # --learner`, one short solo training per row, medians as in "sweep"); rsl_rl 1 for rsl_rl's
    # OnPolicyRunner, 0 for fightlab's PPO (params.learner names it); stage_reached the curriculum's
    "learner_speed": (
        "rsl_rl", "iterations", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter",
        "host_reads_per_iter", "stage_reached", "overflow_count", "nan_resets",
    ),
    # Nsight Compute profile of one factor path, or of the single-launch Newton solve (path "newton",
    # whose factorizations are solves) (fightlab.measure.ncu; params.path, params.probe): medians over
    # its launches; *_pct in %, duration in µs (ncu replay, clocks unlocked), cycles in SM cycles
    "ncu": (
        "launches", "block_size", "grid_size", "duration_us_per_factorization", "duration_us",
        "elapsed_cycles", "sm_active_cycles", "warp_cycles_per_issued_instruction",
        "active_threads_per_warp", "achieved_occupancy_pct", "theoretical_occupancy_pct",
        "achieved_warps_per_sm", "compute_throughput_pct", "memory_throughput_pct",
        "dram_throughput_pct", "l1_hit_rate_pct", "l2_hit_rate_pct",
    ),
    # one source place of an ncu profile's stall samples (fightlab.measure.ncu_source;
    # params.ncu_run_id: the ncu row of that profile, params.key / params.place: what is grouped):
    # samples (count), share of the launch's samples, executed warp instructions, then each stall
    # reason's share of the place's samples (unitless; NVIDIA's reason names)
    "ncu_source": (
        "samples", "share", "executed", "barrier_share", "wait_share", "selected_share",
        "not_selected_share", "long_sb_share", "short_sb_share", "branch_resolving_share",
        "math_share", "mio_share", "no_inst_share", "dispatch_share", "imc_share", "lg_share",
        "other_share",
    ),
    # the Newton solve, MuJoCo Warp's or fightlab's single launch (fightlab.measure.newton_study,
    # notebook 09; params.solver_loop, params.variant: "mujoco_warp" or the kernel's fixes, "all"
    # the default build; params.stage_cycles: median cycles per stage per world's solve): single_launch 1/0;
    # one captured physics step of all worlds [ms]; solve_ms_per_step the solve's activity-timed
    # kernels (uncaptured); solve_cycles_median per world's solve (SM cycles; the CPU's counter in
    # a smoke row); *_rel_err normwise relative errors (unitless) of one solve against MuJoCo
    # Warp's (vs_stock) and a float64 replica (vs_f64; stock_*: MuJoCo Warp's own);
    # rollout_qpos_dev max |Δqpos| [m or rad] after rollout_steps steps, *_ulp: MuJoCo Warp's own
    # from a qvel one float32 ulp away
    "newton": (
        "single_launch", "graph_ms_per_step", "physics_steps_per_s", "launches_per_step",
        "solve_launches_per_step", "solve_ms_per_step", "solve_cycles_median", "rebuilds_per_solve",
        "brackets_per_solve", "nefc_median", "qacc_rel_err_vs_stock", "qacc_rel_err_vs_f64",
        "stock_qacc_rel_err_vs_f64", "efc_force_rel_err_vs_stock", "efc_force_rel_err_vs_f64",
        "stock_efc_force_rel_err_vs_f64", "state_diff_rows", "niter_equal", "rollout_steps",
        "rollout_qpos_dev", "rollout_qpos_dev_ulp",
    ),
}

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _experiment(experiment: str) -> tuple[str, ...]:
    try:
        return EXPERIMENTS[experiment]
    except (KeyError, TypeError):
        raise ValueError(f"unknown experiment {experiment!r}; choices: {sorted(EXPERIMENTS)} "
                         "(add one with fightlab.results.register_experiment)") from None


def columns(experiment: str) -> tuple[str, ...]:
    """All columns of ``experiment``'s file: :data:`META_COLUMNS` + its metric columns.
    ValueError: unknown experiment (names the choices)."""
    return META_COLUMNS + _experiment(experiment)


def register_experiment(name: str, metrics: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Add an experiment's metric columns to :data:`EXPERIMENTS` (idempotent for equal columns):
    ``name`` and each column ``[a-z][a-z0-9_]*``, a column with its unit where it has one.
    Raises ValueError: a bad name, duplicate or metadata column names, or ``name`` already
    registered with other columns."""
    metrics = tuple(metrics)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"experiment name must match [a-z][a-z0-9_]*, got {name!r}")
    if not metrics:
        raise ValueError(f"experiment {name!r} needs at least one metric column")
    for col in metrics:
        if not isinstance(col, str) or not _NAME.match(col):
            raise ValueError(f"metric column of {name!r} must match [a-z][a-z0-9_]*, got {col!r}")
        if col in META_COLUMNS:
            raise ValueError(f"metric column {col!r} of {name!r} clashes with a metadata column")
    if dup := sorted({c for c in metrics if metrics.count(c) > 1}):
        raise ValueError(f"experiment {name!r}: duplicate metric columns {dup}")
    if (old := EXPERIMENTS.get(name)) is not None and old != metrics:
        raise ValueError(f"experiment {name!r} is already registered with columns {old}, not {metrics}")
    EXPERIMENTS[name] = metrics
    return metrics


def results_path(experiment: str, root: Path | str) -> Path:
    """``root/data/results/<experiment>.csv`` (``experiment`` must be registered)."""
    _experiment(experiment)
    return Path(root) / "data" / "results" / f"{experiment}.csv"
