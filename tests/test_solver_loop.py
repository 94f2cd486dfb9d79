"""The Newton loop's form (`TrainConfig.solver_loop`): MuJoCo Warp's conditional loop or the same
iterations unrolled; the physics is the same either way, only the launches differ."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fightlab import results
from fightlab.cli import main
from fightlab.config import ConfigError, EnvConfig, reference_env
from fightlab.measure import report
from fightlab.sim import physics


def _run(loop: str, cfg: EnvConfig, steps: int = 25):
    from fightlab.envs.stance import StanceEnv

    env = StanceEnv("simple", 6, "cpu", seed=3, cfg=cfg, graph=False, solver_loop=loop)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        env.action[:] = torch.rand(env.action.shape, generator=gen) * 2 - 1
        env.step()
    return env


@pytest.mark.parametrize("cfg", [EnvConfig(), reference_env(EnvConfig())], ids=["training", "reference"])
def test_unrolled_and_conditional_loops_give_the_same_physics(cfg):
    """Converged worlds skip the unrolled iterations: qpos, qvel and each world's solver
    iteration count match the conditional loop's to the bit (the reference's 10 iterations stop
    early in most worlds, so the two loops launch different work)."""
    a, b = _run("conditional", cfg), _run("unrolled", cfg)
    assert a.m.opt.graph_conditional is True and b.m.opt.graph_conditional is False
    assert a.engine_solver["solver_loop"] == "conditional" and b.engine_solver["solver_loop"] == "unrolled"
    niter = a.d.solver_niter.numpy()
    assert (niter >= 1).all() and (niter <= cfg.solver_iterations).all()
    np.testing.assert_array_equal(niter, b.d.solver_niter.numpy())
    np.testing.assert_array_equal(a.d.qpos.numpy(), b.d.qpos.numpy())
    np.testing.assert_array_equal(a.d.qvel.numpy(), b.d.qvel.numpy())
    assert np.isfinite(a.d.qpos.numpy()).all()


def test_auto_unrolls_a_short_loop_only():
    assert physics.resolve_solver_loop("auto", 1) == "unrolled"
    assert physics.resolve_solver_loop("auto", physics.UNROLL_MAX_ITERATIONS) == "unrolled"
    assert physics.resolve_solver_loop("auto", physics.UNROLL_MAX_ITERATIONS + 1) == "conditional"
    assert physics.resolve_solver_loop("auto", 10) == "conditional"  # the reference physics
    assert physics.resolve_solver_loop("conditional", 2) == "conditional"
    assert physics.resolve_solver_loop("unrolled", 10) == "unrolled"
    assert physics.resolve_solver_loop("single_launch", 2) == "unrolled"  # MuJoCo Warp's, on fallback
    with pytest.raises(ConfigError, match="solver_loop must be one of auto, conditional, unrolled, single_launch, got 'fast'"):
        physics.resolve_solver_loop("fast", 2)


def test_a_training_takes_the_single_launch_on_cuda_only():
    """A training's "auto" is the single launch on a CUDA device of the MuJoCo Warp backend;
    warp's CPU device and the C engine keep MuJoCo Warp's loop; an explicit choice stays."""
    assert physics.training_solver_loop("auto", "cuda:0") == "single_launch"
    assert physics.training_solver_loop("auto", "cuda:1", "gpu") == "single_launch"
    assert physics.training_solver_loop("auto", "cpu") == "auto"
    assert physics.training_solver_loop("auto", "cpu", "cpu") == "auto"
    assert physics.training_solver_loop("auto", "cuda:0", "cpu") == "auto"
    for loop in ("conditional", "unrolled", "single_launch"):
        assert physics.training_solver_loop(loop, "cuda:0") == loop
        assert physics.training_solver_loop(loop, "cpu") == loop


def test_the_task_resolves_its_loop_before_the_env_is_built(monkeypatch):
    """StanceTask asks `training_solver_loop` with its device and backend and builds the env with
    the answer (what a CUDA training gets: checked here by the answer the env records)."""
    from fightlab.config import TrainConfig
    from fightlab.envs import task as T

    asked = []

    def resolve(loop, device, backend="gpu"):
        asked.append((loop, device, backend))
        return "conditional"

    monkeypatch.setattr(T, "training_solver_loop", resolve)
    env = T.StanceTask(TrainConfig(body="simple", nworld=2, device="cpu"))
    try:
        assert asked == [("auto", "cpu", "gpu")]
        assert env.unwrapped.engine_solver["solver_loop"] == "conditional"
    finally:
        env.close()


def test_a_training_records_its_loop_and_keeps_its_config_id(tmp_path, capsys):
    """The row records the loop the engine ran (params.physics_engine.solver_loop) and the one
    asked (params.solver_loop); the loop is how a run is launched: the config id ignores it."""
    rows = {}
    for loop in ("auto", "conditional"):
        run = tmp_path / loop
        assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--max-iterations", "1",
                     "--set", "ppo.num_steps=4", "--set", f"solver_loop={loop}", "--run-dir", str(run)]) == 0
        rows[loop] = json.loads(results.read_rows("train", run).iloc[0]["params"])
    assert rows["auto"]["solver_loop"] == "auto" and rows["auto"]["physics_engine"]["solver_loop"] == "unrolled"
    assert rows["conditional"]["physics_engine"]["solver_loop"] == "conditional"
    assert report.config_id(rows["auto"]) == report.config_id(rows["conditional"])
    assert report.learner_id(rows["auto"]) == report.learner_id(rows["conditional"])
    capsys.readouterr()
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--set", "solver_loop=fast"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "solver_loop must be one of auto, conditional, unrolled, single_launch, got 'fast'" in err[0], err
    assert main(["train", "--backend", "cpu", "--device", "cpu", "--nworld", "2", "--no-progress",
                 "--set", "solver_loop=unrolled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "solver_loop 'unrolled' is MuJoCo Warp's (backend gpu)" in err[0], err
