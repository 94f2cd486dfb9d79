"""Graphs and host reads. The CPU suite tests the eager path, the on-device learning-rate
rule, warp's CPU graph against eager, the capture discipline (fallbacks, re-capture) and the
host-read guard; the tests marked `cuda` run on a GPU (`bash bench/gpu.sh check` runs them)."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import warp as wp

from fightlab.config import ConfigError, EnvConfig, PPOConfig, TrainConfig
from fightlab.envs.stance import StanceEnv
from fightlab.rl import ppo
from fightlab.rl.graphs import TorchGraph
from fightlab.run.runner import Trainer
from fightlab.sim import physics
from fightlab.timing import HostReadError, HostReads

CUDA = torch.cuda.is_available() and wp.get_cuda_device_count() > 0


def cuda(test):
    """A CUDA-only test: marked `gpu` (the GPU check selects them with `-m gpu`), skipped without CUDA."""
    return pytest.mark.gpu(pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (runs in the recorded GPU check)")(test))



TINY_PPO = PPOConfig(num_steps=4, num_minibatches=2, update_epochs=2)
DETERMINISTIC = ("iteration", "env_steps", "episodes", "reward", "policy_loss", "value_loss",
                 "entropy", "approx_kl", "clipfrac", "learning_rate")


def _cfg(tmp_path, name="run", **kw):
    base = dict(body="simple", nworld=4, device="cpu", max_iterations=2, checkpoint_every=0,
                run_dir=str(tmp_path / name), ppo=TINY_PPO, stop_when_solved=False)
    base.update(kw)
    return TrainConfig(**base)


# --- the KL-adaptive learning rate, on the device ----------------------------------------------

def _rule(lr, kl, desired):  # rsl_rl's PPO.update, as the host code had it
    if kl > 2.0 * desired:
        return max(1e-5, lr / 1.5)
    if 0.0 < kl < 0.5 * desired:
        return min(1e-2, lr * 1.5)
    return lr


@pytest.mark.parametrize("lr", [1e-3, 1.2e-5, 8e-3])
@pytest.mark.parametrize("kl", [0.0, 1e-4, 0.004, 0.005, 0.01, 0.02, 0.0201, 0.5, -0.1, math.nan])
def test_kl_rule_on_the_device_matches_the_host_rule(lr, kl):
    t = torch.tensor(lr, dtype=torch.float32)
    ppo.kl_adaptive_lr(t, torch.tensor(kl), desired_kl=0.01)
    want = lr if math.isnan(kl) else _rule(lr, kl, 0.01)
    assert float(t) == pytest.approx(want, rel=1e-6)


def test_update_moves_the_rate_tensor_adam_reads(tmp_path):
    """The update's KL rule moves the one lr tensor the optimizer's groups hold, and the stats
    report the rate after the update."""
    with Trainer(_cfg(tmp_path, max_iterations=1), progress=False) as tr:
        assert all(g["lr"] is tr.lr for g in tr.optimizer.param_groups)
        row = tr.train()["rows"][0]
        assert row["learning_rate"] == pytest.approx(float(tr.lr)) and float(tr.lr) != 1e-3
        assert all(g["lr"] is tr.lr for g in tr.optimizer.param_groups)


def test_eager_ppo_update_helper_still_learns_and_reports_floats():
    agent = __import__("fightlab.rl.models", fromlist=["ActorCritic"]).ActorCritic(3, 2, hidden=(8,))
    opt, lr = ppo.make_optimizer(agent, 1e-3, "cpu")
    from fightlab.rl.storage import RolloutStorage

    buf = RolloutStorage(2, 8, 3, 2, "cpu")
    buf.obs.normal_()
    buf.advantages.normal_()
    out = ppo.ppo_update(agent, opt, buf, PPOConfig(num_steps=2, num_minibatches=2, update_epochs=2), lr=lr)
    assert set(out) == set(ppo.STATS) and all(isinstance(v, float) and math.isfinite(v) for v in out.values())
    assert out["learning_rate"] == pytest.approx(float(lr))


# --- warp's graph of the env step: equivalence, first step, discipline ------------------------

CFG = EnvConfig(push_interval_s=(0.04, 0.1), push_impulse_ns=(40.0, 80.0), episode_s=0.2)


def _steps(env, n=8):
    out = []
    act = 0.4 * torch.sin(torch.arange(env.nworld * env.nu, dtype=torch.float32).reshape(env.nworld, env.nu))
    for k in range(n):
        o, r, d, info = env.step(act if k % 2 else -act)
        out.append(torch.cat([o.flatten(), r, d, info["fall"], info["timeout"]]).clone())
    return torch.stack(out)


def test_cpu_graph_equals_eager_from_the_first_step():
    """Warp 1.19 captures on its CPU device: the captured step gives bitwise the eager step's
    observations, rewards and flags, from the first recorded step on (the warm-up's step before
    capture leaves no trace: the state after reset is the eager env's)."""
    g = StanceEnv("simple", nworld=3, device="cpu", seed=4, cfg=CFG, graph=True)
    e = StanceEnv("simple", nworld=3, device="cpu", seed=4, cfg=CFG, graph=False)
    g.reset(stagger=True)
    e.reset(stagger=True)
    assert g.graph_captured and not e.graph_captured
    for k, v in g.state_dict().items():
        assert np.array_equal(v, e.state_dict()[k]), k
    assert torch.equal(_steps(g), _steps(e))


def test_unsupported_device_runs_eager_with_one_warning(monkeypatch, capsys):
    monkeypatch.setattr(physics, "graph_unsupported", lambda device: "conditional graph nodes need CUDA >= 12.4")
    env = StanceEnv("simple", nworld=2, device="cpu", seed=1, cfg=CFG)
    ref = StanceEnv("simple", nworld=2, device="cpu", seed=1, cfg=CFG, graph=False)
    env.reset()
    ref.reset()
    err = capsys.readouterr().err
    assert err.count("fightlab: warning: the env step graph runs eager: conditional graph nodes") == 1
    assert env.graph_fallbacks == 1 and not env.graph_captured
    assert torch.equal(_steps(env, 4), _steps(ref, 4))


def test_a_capture_that_raises_leaves_no_graph_and_counts_a_fallback(monkeypatch, capsys):
    class Boom:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            raise RuntimeError("cudaErrorStreamCaptureUnsupported\nsecond line")

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(wp, "ScopedCapture", Boom)
    env = StanceEnv("simple", nworld=2, device="cpu", seed=1, cfg=CFG)
    env.reset()
    err = capsys.readouterr().err
    assert "runs eager: capture failed (RuntimeError: cudaErrorStreamCaptureUnsupported)" in err
    assert "second line" not in err and env.graph_fallbacks == 1 and env._graph.graph is None
    env.step()  # eager from now on


def test_a_replaced_array_recaptures(capsys):
    """A graph holds the arrays of its capture: replacing one (here qvel, with new values)
    re-captures with a warning, and the step reads the new array as the eager env does."""
    g = StanceEnv("simple", nworld=2, device="cpu", seed=2, cfg=CFG, graph=True)
    e = StanceEnv("simple", nworld=2, device="cpu", seed=2, cfg=CFG, graph=False)
    for env in (g, e):
        env.reset(stagger=False)
        env.step()
        v = env.d.qvel.numpy() + 0.3
        env.d.qvel = wp.array(v, dtype=float, device="cpu")
    a, b = _steps(g, 2), _steps(e, 2)
    assert "arrays of the env step graph were replaced; re-capturing" in capsys.readouterr().err
    assert g._graph.recaptures == 1 and g.graph_captured
    assert torch.equal(a, b)


def test_trainer_with_graphs_starts_from_the_reset_state(tmp_path):
    """The first recorded iteration of a run with the env graph equals a run without graphs:
    nothing of the warm-up or the capture leaks into the run."""
    rows = {}
    for graph in (True, False):
        with Trainer(_cfg(tmp_path, f"g{graph}", graph=graph, policy_graph=graph, update_graph=graph),
                     progress=False) as tr:
            rows[graph] = tr.train()["rows"]
            assert tr.env.unwrapped.graph_captured is graph
    for a, b in zip(rows[True], rows[False]):
        for k in DETERMINISTIC:
            assert a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])), k
        assert a["graph_fallbacks"] == 0 and a["host_reads"] == 0  # the CPU summary is host memory


def test_trainer_row_counts_a_fallback(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(physics, "graph_unsupported", lambda device: "warp's memory pool is off")
    with Trainer(_cfg(tmp_path, max_iterations=1), progress=False) as tr:
        res = tr.train()
    assert res["rows"][0]["graph_fallbacks"] == 1 and res["graph_fallbacks"] == 1
    assert "graph runs eager: warp's memory pool is off" in capsys.readouterr().err


def test_torch_graphs_are_eager_on_the_cpu_without_a_fallback():
    calls = []
    g = TorchGraph(lambda: calls.append(1), "cpu", enabled=True)
    assert not g.enabled and not g.capture()
    g()
    assert calls == [1] and g.fallbacks == 0 and g.graph is None


# --- one host read per iteration ----------------------------------------------------------------

def test_host_read_guard_counts_and_forbids_warp_reads():
    a = wp.zeros(3, dtype=float, device="cpu")
    with HostReads("cpu") as reads:
        a.numpy()
        wp.synchronize_device("cpu")
        with reads.expected():
            a.numpy()
        assert reads.count == 3 and reads.unexpected == 2
        assert reads.take() == 3 and reads.count == 0
    assert wp.array.numpy is not HostReads.__dict__.get("numpy")  # patch undone
    with HostReads("cpu", strict=True) as reads:
        with reads.expected():
            a.numpy()
        with pytest.raises(HostReadError, match=r"outside the iteration's summary: wp.array.numpy\(\)"):
            a.numpy()


def test_an_extra_read_in_the_iteration_is_caught(tmp_path):
    """A read slipped into the env step is counted in the rows, and a strict guard refuses it."""
    with Trainer(_cfg(tmp_path, max_iterations=1), progress=False) as tr:
        advance = tr.env.advance

        def leaky():
            advance()
            tr.env.unwrapped.d.qpos.numpy()  # a device read inside the rollout

        tr.env.advance = leaky
        row = tr.train()["rows"][0]
        assert row["host_reads"] == TINY_PPO.num_steps
    with Trainer(_cfg(tmp_path, "strict", max_iterations=1), progress=False) as tr:
        tr._reads = HostReads("cpu", strict=True)
        tr.env.advance = lambda: tr.env.unwrapped.d.qpos.numpy()
        with pytest.raises(HostReadError):
            tr.train()


def test_resume_hands_the_loaded_rate_to_the_rate_tensor(tmp_path):
    with Trainer(_cfg(tmp_path, max_iterations=1, checkpoint_every=1), progress=False) as a:
        a.train()
        lr = float(a.lr)
    ck = torch.load(tmp_path / "run" / "latest.pt", weights_only=False)
    assert all(isinstance(g["lr"], float) for g in ck["optimizer"]["param_groups"])
    with Trainer(dataclasses.replace(_cfg(tmp_path), max_iterations=2, resume=str(tmp_path / "run" / "latest.pt")),
                 progress=False) as b:
        b._start()
        assert float(b.lr) == pytest.approx(lr) and all(g["lr"] is b.lr for g in b.optimizer.param_groups)


# --- on the GPU (a recorded GPU run) --------------------------------------------------------------

@cuda
@pytest.mark.parametrize("critic_lr,kl_estimator", [(None, "k3"), (1e-3, "k3"), (None, "analytic")])
def test_cuda_graphed_update_equals_eager(tmp_path, critic_lr, kl_estimator):
    """The captured PPO update replayed against the same update run eagerly, on one rollout and
    from one state (weights, normaliser, Adam state, rate and permutations), on CUDA: the same
    parameters, rate and losses; also with the critic in an Adam group of its own and with the
    analytic KL. Two whole trainings cannot be compared: MuJoCo Warp's step accumulates with
    atomics, so two CUDA rollouts of one seed differ in the last bits, and 20 Adam steps at a
    grown rate part the weights by ~2e-2 between two eager runs too (measured on the H200)."""
    cfg = _cfg(tmp_path, "u", device="cuda:0", nworld=256, max_iterations=1,
               ppo=PPOConfig(critic_learning_rate=critic_lr, kl_estimator=kl_estimator, desired_kl=1.0),
               policy_graph=True, update_graph=True)
    with Trainer(cfg, progress=False) as tr:
        row = tr.train()["rows"][0]  # one iteration: graphs captured, a rollout in the buffer
        assert tr.ppo_graph.graph is not None and row["graph_fallbacks"] == 0
        assert len(tr.optimizer.param_groups) == (1 if critic_lr is None else 2)
        tr.update.draw()
        state = [*tr.agent.state_dict().values(), tr.lr, tr.update.perm,
                 *(v for st in tr.optimizer.state.values() for v in st.values() if torch.is_tensor(v))]
        saved = [t.detach().clone() for t in state]
        out = {}
        for how, run in (("eager", tr._update_step), ("graph", tr.ppo_graph)):
            with torch.no_grad():
                for t, v in zip(state, saved):
                    t.copy_(v)  # in place: the graph's tensors keep their storage
            run()
            torch.cuda.synchronize()
            out[how] = ({k: v.detach().cpu().clone() for k, v in tr.agent.state_dict().items()},
                        float(tr.lr), tr.update.stats.detach().cpu().clone())
    (pa, la, sa), (pb, lb, sb) = out["graph"], out["eager"]
    moved = max(float((pa[k] - saved[i].cpu()).abs().max()) for i, k in enumerate(pa))
    assert moved > 1e-4, moved  # the update did move the weights (not a comparison of no-ops)
    assert la == pytest.approx(lb, rel=1e-6)
    worst = max(float((pa[k] - pb[k]).abs().max()) for k in pa)
    # float32 rounding, not bitwise: cuBLAS may pick other kernels under capture (observed on the
    # H200 at ce380b3: 1.9e-6 after the 20 Adam steps of one update)
    assert worst <= 1e-5, worst
    assert torch.allclose(sa, sb, rtol=1e-4, atol=1e-6), (sa, sb)


@cuda
def test_cuda_iterations_read_the_host_once(tmp_path):
    """Full iterations under torch.cuda.set_sync_debug_mode("error") and the warp read guard: no
    read but the summary; every row says host_reads == 1."""
    # also with the critic's Adam group of its own, and with the analytic KL
    for critic_lr, kl in ((None, "k3"), (1e-3, "k3"), (None, "analytic")):
        cfg = _cfg(tmp_path, f"r{critic_lr}{kl}", device="cuda:0", nworld=256, max_iterations=3,
                   ppo=PPOConfig(critic_learning_rate=critic_lr, kl_estimator=kl))
        with Trainer(cfg, progress=False) as tr:
            tr._reads = HostReads("cuda:0", strict=True)
            rows = tr.train()["rows"]
        assert [r["host_reads"] for r in rows] == [1, 1, 1], critic_lr
        assert all(r["graph_fallbacks"] == 0 for r in rows)
        assert all(0 < r["update_s"] < r["wall_s"] and 0 < r["rollout_s"] < r["wall_s"] for r in rows)


@cuda
def test_cpu_backend_with_its_policy_on_cuda_reads_as_counted(tmp_path):
    """The CPU backend with its policy on the GPU (`TrainConfig.policy_device`): under the strict
    guard the only reads are the summary and the action copied out at each env step (the
    observation goes in without a wait): num_steps + 1 per iteration; the policy and update
    graphs capture (no fallback); the policy's tensors live on the GPU."""
    cfg = _cfg(tmp_path, device="cpu", backend="cpu", workers=2, policy_device="cuda:0", nworld=64,
               max_iterations=3, ppo=PPOConfig(num_steps=8, num_minibatches=2))
    with Trainer(cfg, progress=False) as tr:
        tr._reads = HostReads("cuda:0", strict=True)
        rows = tr.train()["rows"]
        assert tr.io.obs.is_cuda and tr.buf.obs.is_cuda and not tr.env.obs.is_cuda
        assert torch.equal(tr.io.obs.cpu(), tr.env.obs)
    assert [r["host_reads"] for r in rows] == [8 + 1] * 3
    assert all(r["graph_fallbacks"] == 0 for r in rows)
    assert all(0 < r["update_s"] < r["wall_s"] for r in rows)


def test_notebook_05_smoke_runs_on_the_cpu_and_writes_nothing_in_data(tmp_path):
    """Notebook 05 at size smoke through `reproduce` (papermill, run in notebooks/): its rows go
    to runs/graphs/nb05-smoke-cpu/, its trainings under train/ there, the figure is drawn from
    the rows, data/ is untouched."""
    import subprocess

    from fightlab import results
    from fightlab.paths import REPO_ROOT, RUNS
    from fightlab.reproduce import reproduce

    def status():
        return subprocess.run(["git", "status", "--porcelain", "data", "figures"], cwd=REPO_ROOT,
                              capture_output=True, text=True).stdout
    before = status()
    assert reproduce(only=["05"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    root = RUNS / "graphs" / "nb05-smoke-cpu"
    df = results.read_rows("graphs", root)
    assert sorted(df["env_graph"].astype(bool)) == [False, True] and (df["iterations"] == 2).all()
    for c in ("physics_ms_per_step", "env_extra_ms_per_step", "env_step_ms_per_step", "policy_ms_per_step"):
        assert (df[c] > 0).all(), c
    # a share of CPU times taken apart (not a measurement: the CPU is shared, its timings noisy)
    assert (df["measured_non_physics_share"] > 0).all() and np.isfinite(df["measured_non_physics_share"]).all()
    assert (root / "figures" / "graphs_split.png").exists() and status() == before
    # its short trainings inside the notebook's own folder, named by size and device through it
    assert {p.name for p in (root / "train").iterdir()} >= {"simple-4-none", "simple-4-all"}


def test_step_split_times_each_part_and_puts_the_state_back(tmp_path):
    from fightlab.measure.graphs import step_split

    with Trainer(_cfg(tmp_path, max_iterations=1), progress=False) as tr:
        tr.train()
        before = tr.env.state_dict()
        split = step_split(tr, nstep=2, repeats=1)
        after = tr.env.state_dict()
    assert set(split) == {"physics_ms_per_step", "env_extra_ms_per_step", "env_step_ms_per_step",
                          "policy_ms_per_step", "env_graph"}
    assert all(split[k] > 0 for k in split if k != "env_graph") and split["env_graph"] is True
    for k in before:
        assert np.array_equal(before[k], after[k]), k


def test_a_cuda_checkpoints_optimizer_settings_resume_on_the_cpu(tmp_path):
    """A checkpoint written on CUDA holds Adam groups with capturable=True, fused=True and step
    counts as tensors; resumed on the CPU the optimizer keeps this device's settings and trains."""
    with Trainer(_cfg(tmp_path, max_iterations=1, checkpoint_every=1), progress=False) as a:
        a.train()
    path = tmp_path / "run" / "latest.pt"
    ck = torch.load(path, weights_only=False)
    for g in ck["optimizer"]["param_groups"]:
        g.update(capturable=True, fused=True, foreach=None)
    torch.save(ck, tmp_path / "run" / "cuda-like.pt")
    with Trainer(dataclasses.replace(_cfg(tmp_path), max_iterations=2,
                                     resume=str(tmp_path / "run" / "cuda-like.pt")), progress=False) as b:
        row = b.train()["rows"][-1]
        assert all(g["capturable"] is False and not g["fused"] for g in b.optimizer.param_groups)
    assert row["iteration"] == 2 and math.isfinite(row["policy_loss"])


# --- found by the break-it review ------------------------------------------------------------------

def test_a_run_folder_of_the_older_schema_resumes_and_finishes(tmp_path):
    """A run written before host_reads / graph_fallbacks existed (its rows.csv, its history and
    its run-folder train.csv lack them) resumes: one header with every column, the old rows'
    values kept, the new fields empty for them, and the result row written."""
    import pandas as pd

    from fightlab import results
    from fightlab.measure.report import finish_run

    d = tmp_path / "run"
    with Trainer(_cfg(tmp_path, max_iterations=2, checkpoint_every=2), progress=False) as a:
        finish_run(a, a.train())
    ck = torch.load(d / "latest.pt", weights_only=False)
    for r in ck["history"]:
        del r["host_reads"], r["graph_fallbacks"], r["tracking_survived"], r["window_tracking_survived"]
    torch.save(ck, d / "latest.pt.old")
    (d / "latest.pt.old").replace(d / "ckpt_000002.pt")
    rows = pd.read_csv(d / "rows.csv").drop(columns=["host_reads", "graph_fallbacks", "tracking_survived",
                                                      "window_tracking_survived"])
    rows.to_csv(d / "rows.csv", index=False)
    t = results.results_path("train", d)
    n = 4 + len(results.REFERENCE_COLUMNS)  # the row file as it was before those columns
    t.write_text("\n".join(ln.rsplit(",", n)[0] for ln in t.read_text().splitlines()) + "\n")
    assert results.read_rows("train", d)["graph_fallbacks"].isna().all()  # the older schema reads
    with Trainer(dataclasses.replace(_cfg(tmp_path), max_iterations=4, resume=str(d / "ckpt_000002.pt")),
                 progress=False) as b:
        finish_run(b, b.train())
    got = pd.read_csv(d / "rows.csv")
    assert got["iteration"].tolist() == [1, 2, 3, 4]
    assert got["host_reads"].isna().tolist() == [True, True, False, False]
    assert got["window_tracking_survived"][:2].isna().all()
    assert got["policy_loss"][:2].tolist() == rows["policy_loss"].tolist()
    res = results.read_rows("train", d)
    assert len(res) == 1 and res["iterations"].item() == 4 and res["graph_fallbacks"].item() == 0


def test_an_old_cuda_without_conditional_nodes_runs_eager(monkeypatch, capsys):
    class FakeCuda:
        is_cpu = False

    monkeypatch.setattr(wp, "get_device", lambda *a: FakeCuda())
    monkeypatch.setattr(wp, "is_mempool_enabled", lambda *a: True)
    monkeypatch.setattr(wp, "is_conditional_graph_supported", lambda: False)
    g = physics.StepGraph(lambda: None, "cuda:0")
    assert g.capture() is False and g.fallbacks == 1 and g.graph is None
    assert "graph runs eager: conditional graph nodes need CUDA >= 12.4 (driver" in capsys.readouterr().err


def test_host_reads_reissue_other_warnings_and_nest(monkeypatch):
    import warnings

    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", lambda mode: None)
    numpy = wp.array.numpy
    h = HostReads("cuda:0", strict=True)
    with pytest.warns(UserWarning, match="the caller's own warning"):
        with h:
            with h:  # nested: a no-op
                warnings.warn("the caller's own warning")
            with h.expected():
                pass
    assert wp.array.numpy is numpy  # the outermost exit restored warp
    wp.zeros(2, device="cpu").numpy()  # no guard left behind


def test_host_reads_expected_outside_the_guard_changes_nothing(monkeypatch):
    """The runner's start pulls the env's outputs (an expected read) before any iteration enters
    the guard; on CUDA that once raised AttributeError (no recording yet) on the H200."""
    modes = []
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    h = HostReads("cuda:0", strict=True)
    with h.expected():
        pass
    assert modes == [] and h.take() == 0  # torch's mode untouched, nothing counted
    with h:
        with h.expected():
            pass
    assert modes == ["error", "warn", "error", 0]  # enter, expected in/out, restore at exit


def test_host_reads_count_what_comes_after_the_last_drain(monkeypatch):
    """torch's sync warnings and the caller's own warnings recorded after the last `expected()` are
    counted (or re-issued) at the guard's exit; an exception inside `expected()` still counts its
    read as sanctioned; a guard closed inside `expected()` leaves torch's mode as it found it."""
    import warnings

    from fightlab.timing import SYNC_WARNING

    modes = []
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    h = HostReads("cuda:0")
    with pytest.warns(UserWarning, match="the caller's late warning"):
        with h:
            with h.expected():
                warnings.warn(f"x {SYNC_WARNING} y")  # the summary read
            warnings.warn(f"x {SYNC_WARNING} z")  # a read after it
            warnings.warn("the caller's late warning")
    assert (h.count, h.unexpected) == (2, 1)
    h.take()
    with h:
        with pytest.raises(RuntimeError):
            with h.expected():
                warnings.warn(f"x {SYNC_WARNING} y")
                raise RuntimeError("inside")
        assert (h.take(), h.unexpected) == (1, 0)
    modes.clear()
    ctx = h.expected()
    with h:
        ctx.__enter__()
    ctx.__exit__(None, None, None)
    assert modes[-1] == 0  # the saved mode, not the guard's


def test_eager_ppo_update_moves_the_rate_adam_uses():
    from fightlab.rl.models import ActorCritic
    from fightlab.rl.storage import RolloutStorage

    agent = ActorCritic(3, 2, hidden=(8,))
    opt = torch.optim.Adam(agent.parameters(), lr=1e-3)  # a float rate
    buf = RolloutStorage(2, 8, 3, 2, "cpu")
    buf.obs.normal_()
    buf.advantages.normal_()
    out = ppo.ppo_update(agent, opt, buf, PPOConfig(num_steps=2, num_minibatches=2, update_epochs=3,
                                                    desired_kl=1e-9))
    assert out["learning_rate"] == pytest.approx(float(opt.param_groups[0]["lr"])) and out["learning_rate"] < 1e-3


def _budget_rows():
    import json

    from fightlab.config import EnvConfig, training_physics

    phys = training_physics(EnvConfig())
    g = dict(run_id="g1", body="simple", nworld=1024, gpu="NVIDIA H200", time="2026-12-03T10:00:00+00:00",
             commit="abc1234", params=json.dumps(dict(setting="all", num_steps=32, physics=phys)),
             s_per_iter=0.140, rollout_s_per_iter=0.120, update_s_per_iter=0.015, physics_ms_per_step=3.0,
             env_extra_ms_per_step=0.2, policy_ms_per_step=0.1)
    prof = dict(run_id="p1", body="simple", nworld=1024, gpu="NVIDIA H200", time="2026-12-03T09:00:00+00:00",
                commit="abc1234", kernel_ms_per_step=1.0,
                params=json.dumps(dict(iterations=phys["solver_iterations"], ls_iterations=phys["solver_ls_iterations"],
                                       qacc_smooth=phys["solver_qacc_smooth"], eulerdamp=phys["solver_eulerdamp"])),
                constraint_solve_ms_per_step=0.6, narrowphase_ms_per_step=0.3, kinematics_ms_per_step=0.1,
                env_ms_per_step=0.5)
    return g, prof


def test_the_time_budget_sums_to_the_measured_iteration():
    """Notebook 05's table: the physics alone split by the profile's stage proportions, the env's
    kernels, the policy, the rollout's and the host's remainders, the update: they add up to
    s_per_iter; the env's own kernels in the profile do not count as physics."""
    from fightlab.measure.graphs import time_budget

    g, prof = _budget_rows()
    t = time_budget(g, prof).set_index("part")
    assert t["ms_per_iter"].sum() == pytest.approx(140.0) and t["share"].sum() == pytest.approx(1.0)
    physics = 3.0 * 32
    assert t.loc["physics: constraint solve", "ms_per_iter"] == pytest.approx(physics * 0.6)
    assert t.loc["physics: narrowphase", "ms_per_iter"] == pytest.approx(physics * 0.3)
    assert t.loc["env kernels", "ms_per_iter"] == pytest.approx(0.2 * 32)
    assert t.loc["policy", "ms_per_iter"] == pytest.approx(0.1 * 33)
    assert t.loc["PPO update", "ms_per_iter"] == pytest.approx(15.0)
    assert t.loc["host (wall − rollout − update)", "ms_per_iter"] == pytest.approx(5.0)
    assert t.loc["rollout gaps (rollout − the parts above)", "ms_per_iter"] == pytest.approx(120 - physics - 6.4 - 3.3)
    one = time_budget(g).set_index("part")  # no profile row: one physics line, the same sum
    assert one.loc["physics", "ms_per_iter"] == pytest.approx(physics) and one["ms_per_iter"].sum() == pytest.approx(140.0)
    with pytest.raises(ConfigError, match="has no policy_ms_per_step"):
        time_budget({**g, "policy_ms_per_step": float("nan")})


def test_the_budget_splits_the_physics_only_by_a_profile_of_the_same_physics():
    import json

    import pandas as pd

    from fightlab.measure.graphs import budget_rows, budget_tables

    g, prof = _budget_rows()
    other = {**prof, "run_id": "p2", "time": "2026-12-03T11:00:00+00:00",
             "params": json.dumps(dict(iterations=10, ls_iterations=20))}  # newer, the reference physics
    gdf, pdf = pd.DataFrame([g]), pd.DataFrame([prof, other])
    row, p, note = budget_rows(gdf, pdf, "simple", 1024)
    assert p["run_id"] == "p1" and "profile row p1" in note
    assert "not training's" in note  # p1 profiled the stock factor path; training runs the tree kernel
    tree = {**prof, "run_id": "p0", "time": "2026-12-03T08:00:00+00:00",
            "params": json.dumps({**json.loads(prof["params"]), "tree_factor": True})}  # older, training's path
    row, p, note = budget_rows(gdf, pd.DataFrame([prof, other, tree]), "simple", 1024)
    assert p["run_id"] == "p0" and "not training's" not in note
    row, p, note = budget_rows(gdf, pd.DataFrame([other]), "simple", 1024)
    assert p is None and "the physics is one line" in note
    old = {**g, "params": json.dumps(dict(setting="all", num_steps=32))}  # before params.physics: the reference
    assert budget_rows(pd.DataFrame([old]), pdf, "simple", 1024)[1]["run_id"] == "p2"
    # a graphs row of the single-launch solve takes that solve's profile row, never MuJoCo Warp's
    single = {**g, "params": json.dumps({**json.loads(g["params"]), "physics_engine": {"solver_loop": "single_launch"}})}
    row, p, note = budget_rows(pd.DataFrame([single]), pdf, "simple", 1024)
    assert p is None and "single-launch solve" in note
    sl = {**prof, "run_id": "p3", "params": json.dumps({**json.loads(prof["params"]), "solver_loop": "single_launch"})}
    assert budget_rows(pd.DataFrame([single]), pd.DataFrame([prof, other, sl]), "simple", 1024)[1]["run_id"] == "p3"
    assert budget_rows(gdf, pd.DataFrame([prof, sl]), "simple", 1024)[1]["run_id"] == "p1"
    table, notes = budget_tables(gdf, pdf, ["simple"], 1024)
    assert table["ms_per_iter"].sum() == pytest.approx(140.0) and notes[0].startswith("simple ×1024")
    with pytest.raises(ConfigError, match="no graphs row of muscular-fast"):
        budget_rows(gdf, pdf, "muscular-fast", 1024)


def test_the_budget_of_a_world_count_no_profile_has():
    import pandas as pd

    from fightlab.measure.graphs import budget_rows

    g, prof = _budget_rows()
    row, p, note = budget_rows(pd.DataFrame([{**g, "nworld": 4}]), pd.DataFrame([prof]), "simple", 4)
    assert p is None and "no profile row of simple at 4 worlds" in note
