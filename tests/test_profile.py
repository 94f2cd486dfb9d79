"""fightlab.measure.profile: the name->stage table covers every kernel of a step, aggregation maths on
synthetic timing records, the "other" check, CPU behaviour, result rows, NVTX ranges, notebook 02."""

import json
import math

import pandas as pd
import pytest

from fightlab import results
from fightlab.config import EnvConfig, reference_env
from fightlab.bodies import build
from fightlab.bodies.describe import describe
from fightlab.reproduce import reproduce
from fightlab.figures.profile import plot_stages
from fightlab.measure import profile as P
from fightlab.sim import nvtx as N

PHYSICS_STAGES = [s for s in P.STAGES if s not in ("env", "other")]


#: the reference physics (qacc_smooth and eulerdamp on): every stage launches, the factor twice
REFERENCE = reference_env(EnvConfig())


def nfactor(env: EnvConfig) -> int:
    """Factorisations of M per physics step: M + h·D in the Euler step unless the joints' damping is
    explicit (`EnvConfig.solver_eulerdamp`), and M itself for qacc_smooth unless it is skipped
    (`EnvConfig.solver_qacc_smooth`)."""
    return int(env.solver_eulerdamp) + int(env.solver_qacc_smooth)


#: in the training physics (today's defaults) and in the reference physics
NFACTOR, NFACTOR_REF = nfactor(EnvConfig()), nfactor(REFERENCE)


@pytest.fixture(scope="module", params=["muscular-fast", "simple"])
def env_kernels(request):
    """Kernels launched by one env step (5 physics substeps + env kernels) on the CPU, in the
    reference physics (the one that launches every stage)."""
    return request.param, P.kernel_names(request.param, what="env", nworld=2, device="cpu", env=REFERENCE)


@pytest.mark.parametrize("physics", ["reference", "training"])
def test_stage_table_covers_every_kernel_of_an_env_step(env_kernels, physics):
    body, k = env_kernels
    if physics == "training":
        k = P.kernel_names(body, what="env", nworld=2, device="cpu")
    assert len(k) > 50
    missing = k[k["stage"] == "other"]
    assert missing.empty, f"{body}: kernels outside fightlab.measure.profile.KERNEL_STAGES: {list(missing['kernel'])}"
    # the exact table, not only the module fallback, knows each of them
    assert not [n for n in k["kernel"] if n not in P.KERNEL_STAGES]
    launched = set(k[k["launches_per_step"] > 0]["stage"])
    stages = set(PHYSICS_STAGES) - ({"mass-matrix factor"} if physics == "training" and not NFACTOR else set())
    assert stages <= launched and "env" in launched, launched
    if physics == "training" and not NFACTOR:  # explicit damping, no qacc_smooth: M is factored only inside Newton
        assert "mass-matrix factor" not in launched, launched


def test_mass_matrix_factor_paths(env_kernels):
    body, k = env_kernels
    per = dict(zip(k["kernel"], k["launches_per_step"]))
    substeps = 5
    if body == "muscular-fast":   # sparse path: one _qLD_acc launch per tree level and factorisation
        levels = describe(build(body))["tree_depth"] - 1
        assert per["_qLD_acc__locals__kernel"] == NFACTOR_REF * levels * substeps
        assert not any("tile_cholesky_factorize_solve_block" in n for n in per)
    else:                         # dense tile Cholesky (nv <= M_BLOCK_DENSE_MAX)
        assert "_qLD_acc__locals__kernel" not in per
        assert per["_tile_cholesky_factorize_solve_block__locals__kernel"] == NFACTOR_REF * substeps
    # the Newton Hessian factor is part of the solve, not of the mass-matrix factor
    assert P.stage_of("_update_gradient_cholesky_blocked__locals__kernel") == "constraint solve"


def test_tree_factor_replaces_the_per_level_launches():
    """With fightlab's kernel on (the training default), muscular-fast factors M in one launch per
    factorization: NFACTOR_REF per physics step in the reference physics (M + h·D in the Euler
    step, and M for qacc_smooth), no _qLD_acc."""
    k = P.kernel_names("muscular-fast", what="env", nworld=2, device="cpu", tree_factor=True, env=REFERENCE)
    per = dict(zip(k["kernel"], k["launches_per_step"]))
    assert per[P.TREE_FACTOR_SHARED] == NFACTOR_REF * 5 and "_qLD_acc__locals__kernel" not in per
    assert "_factor_tree" not in per  # the shared variant is the default for this tree
    assert P.stage_of(P.TREE_FACTOR_SHARED) == "mass-matrix factor"
    assert P.stage_of("_factor_tree") == "mass-matrix factor"


def test_kernel_key_and_stage_of():
    assert P.kernel_key("forward kernel _cinert_0a1b2c3d") == "_cinert"
    assert P.kernel_key("forward kernel _qLD_acc__locals__kernel_deadbeef") == "_qLD_acc__locals__kernel"
    assert P.kernel_key("_cinert") == "_cinert"
    assert P.stage_of("forward kernel _qLD_acc__locals__kernel_deadbeef") == "mass-matrix factor"
    assert P.stage_of("_unknown_kernel") == "other"
    assert P.stage_of("_new_ccd_kernel", "mujoco_warp._src.collision_convex") == "narrowphase"
    assert set(P.KERNEL_STAGES.values()) | set(P.MODULE_STAGES.values()) <= set(P.STAGES)
    assert set(P.STAGE_DOC) == set(P.STAGES)
    assert P.stage_slug("mass-matrix factor") == "mass_matrix_factor"


def _synthetic():
    # 2 steps: _cinert 1 ms x2, _qLD_acc 2 ms x4 (2 per step), an unknown kernel 0.5 ms x2,
    # a kernel known only by module 0.25 ms x2
    recs = []
    for _ in range(2):
        recs.append(P.Record("forward kernel _cinert_0a1b2c3d", 1.0))
        recs += [P.Record("forward kernel _qLD_acc__locals__kernel_12345678", 2.0)] * 2
        recs.append(P.Record("forward kernel _mystery_87654321", 0.5))
        recs.append(P.Record("forward kernel _gjk_x_11112222", 0.25))
    return recs


def test_aggregate_by_kernel_and_stage():
    by_kernel, by_stage = P.aggregate(_synthetic(), nstep=2,
                                      modules={"_gjk_x": "mujoco_warp._src.collision_gjk"},
                                      launches={"_never_timed": 3})
    k = by_kernel.set_index("kernel")
    assert k.loc["_qLD_acc__locals__kernel", "ms_per_step"] == pytest.approx(4.0)
    assert k.loc["_qLD_acc__locals__kernel", "launches_per_step"] == 2
    assert k.loc["_cinert", "ms_per_step"] == pytest.approx(1.0)
    assert k.loc["_mystery", "stage"] == "other"
    assert k.loc["_gjk_x", "stage"] == "narrowphase"
    assert k.loc["_never_timed", "ms_per_step"] == 0.0 and k.loc["_never_timed", "launches_per_step"] == 1.5
    total = 1.0 + 4.0 + 0.5 + 0.25
    assert k["share"].sum() == pytest.approx(1.0)
    assert by_kernel["kernel"].iloc[0] == "_qLD_acc__locals__kernel"    # sorted by time
    s = by_stage.set_index("stage")
    assert list(by_stage["stage"]) == list(P.STAGES)
    assert s.loc["mass-matrix factor", "share"] == pytest.approx(4.0 / total)
    assert s.loc["inertia", "ms_per_step"] == pytest.approx(1.0)
    assert s.loc["other", "ms_per_step"] == pytest.approx(0.5)
    assert s.loc["kinematics", "ms_per_step"] == 0.0
    assert s["ms_per_step"].sum() == pytest.approx(total)
    assert s["launches_per_step"].sum() == pytest.approx(1 + 2 + 1 + 1 + 1.5)


def test_aggregate_untimed_counts_launches():
    by_kernel, by_stage = P.aggregate([], nstep=4, launches={"_cinert": 8, "_M": 4})
    assert by_kernel["ms_per_step"].isna().all() and by_kernel["share"].isna().all()
    s = by_stage.set_index("stage")
    assert s.loc["inertia", "launches_per_step"] == 3.0
    assert math.isnan(s.loc["inertia", "ms_per_step"])
    assert P.check_other(by_stage, by_kernel) == []       # nothing timed: nothing to fail
    with pytest.raises(ValueError, match="nstep"):
        P.aggregate([], nstep=0)


def test_check_other_fails_above_two_percent():
    by_kernel, by_stage = P.aggregate(_synthetic(), nstep=2)   # other: 0.5 + 0.25 of 5.75 ms
    fails = P.check_other(by_stage, by_kernel)
    assert len(fails) == 1 and "other" in fails[0] and "_mystery" in fails[0] and "> 2%" in fails[0]
    ok = [P.Record("forward kernel _cinert_0a1b2c3d", 99.0), P.Record("forward kernel _mystery_87654321", 1.0)]
    assert P.check_other(*reversed(P.aggregate(ok, nstep=1))) == []        # 1 % passes
    edge = [P.Record("_cinert", 97.0), P.Record("_mystery", 3.0)]
    assert P.check_other(P.aggregate(edge, 1)[1], limit=0.05) == []
    assert P.check_other(P.aggregate(edge, 1)[1], limit=0.02)
    assert P.unmapped(["_cinert", "_mystery"]) == ["_mystery"]


class _FakeNvtx:
    def __init__(self):
        self.calls = []

    def push_range(self, message=None, color=None, domain=None, **kw):
        self.calls.append(("push", message, domain))

    def pop_range(self, domain=None):
        self.calls.append(("pop", domain))


def test_nvtx_range_uses_the_nvtx_api(monkeypatch):
    nvtx = pytest.importorskip("nvtx")
    fake = _FakeNvtx()
    monkeypatch.setattr(nvtx, "push_range", fake.push_range)
    monkeypatch.setattr(nvtx, "pop_range", fake.pop_range)
    N.set_backend(None)          # import nvtx afresh
    with N.nvtx_range("physics"):
        with N.nvtx_range("observation/reward"):
            pass
    assert fake.calls == [("push", "physics", "fightlab"), ("push", "observation/reward", "fightlab"),
                          ("pop", "fightlab"), ("pop", "fightlab")]
    with pytest.raises(RuntimeError):
        with N.nvtx_range("update"):
            raise RuntimeError("boom")
    assert fake.calls[-1] == ("pop", "fightlab")   # popped on errors too


def test_nvtx_range_without_nvtx_is_a_noop():
    N.set_backend(False)
    try:
        r = N.nvtx_range("physics")
        assert r is N.nvtx_range("reset")
        with r:
            pass
    finally:
        N.set_backend(None)


def test_launch_recorder_restores_launch():
    import warp as wp
    import warp._src.context as ctx

    before = (wp.launch, ctx.launch)
    with pytest.raises(KeyError):
        with P.LaunchRecorder():
            assert wp.launch is not before[0]
            raise KeyError("x")
    assert (wp.launch, ctx.launch) == before


@pytest.fixture
def fake_nvtx():
    fake = _FakeNvtx()
    N.set_backend(fake)
    yield fake
    N.set_backend(None)


def test_profile_on_cpu_says_so_and_writes_a_valid_row(fake_nvtx, tmp_path):
    fake = fake_nvtx
    res = P.profile("simple", nworld=2, nstep=2, device="cpu", settle_steps=1, repeats=3)
    assert not res.timed and "no kernel timing on cpu" in res.message
    assert ("push", "physics", "fightlab") in fake.calls     # the profiled steps are an NVTX range
    assert res.launches_per_step > 50 and math.isnan(res.kernel_ms_per_step)
    assert res.graph_ms_per_step > 0 and res.failures == []
    path = "dense" if NFACTOR else "none"  # the training physics may factor M only inside Newton
    assert res.params["factor_path"] == path and res.params["iterations"] == EnvConfig().solver_iterations
    assert results.EXPERIMENTS["profile"] == P.row_metrics()
    row = P.result_row(res)
    results.validate_row("profile", row)
    assert row["kernel_ms_per_step"] is None and row["mass_matrix_factor_launches_per_step"] == NFACTOR
    results.append_row("profile", row, tmp_path)
    back = P.latest_rows(results.read_rows("profile", tmp_path))
    assert len(back) == 1 and json.loads(back["params"][0])["what"] == "physics"
    assert P.factor_table(back)["factor_path"].tolist() == [path]
    fig = plot_stages(back)
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="what must be"):
        P.profile("simple", nworld=2, nstep=1, device="cpu", what="policy")


def test_profile_notebook_runs_at_smoke_size(tmp_path):
    assert reproduce(only=["02"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    text = json.dumps(json.loads((tmp_path / "02_profile-smoke.ipynb").read_text()))
    assert "no kernel timing on cpu" in text and "kernels outside the table: none" in text


def test_env_and_trainer_emit_every_stage_range(monkeypatch, tmp_path):
    """One uncaptured training iteration pushes the five stage ranges through the nvtx API."""
    nvtx = pytest.importorskip("nvtx")
    from fightlab.config import PPOConfig, TrainConfig
    from fightlab.run.runner import Trainer

    seen = []
    monkeypatch.setattr(nvtx, "push_range", lambda message=None, **kw: seen.append(message))
    monkeypatch.setattr(nvtx, "pop_range", lambda **kw: None)
    N.set_backend(None)  # import nvtx afresh: the patched functions
    cfg = TrainConfig(body="simple", nworld=2, device="cpu", max_iterations=1, graph=False,
                      run_dir=str(tmp_path), ppo=PPOConfig(num_steps=2, num_minibatches=1, update_epochs=1))
    Trainer(cfg, progress=False).train()
    assert set(N.NVTX_RANGES) <= set(seen), seen


def test_profile_solver_loop_single_launch_on_cpu(fake_nvtx):
    from fightlab.config import ConfigError
    from fightlab.measure.stages import NEWTON_KERNEL

    kw = dict(nworld=2, nstep=1, device="cpu", settle_steps=1, repeats=1, graph=False)
    auto = P.profile("simple", **kw)
    one = P.profile("simple", solver_loop="single_launch", **kw)
    assert auto.params["solver_loop"] == "unrolled" and "solver loop: unrolled" in auto.summary()
    assert one.params["solver_loop"] == "single_launch" and "solver loop: single_launch" in one.summary()
    assert one.launches_per_step <= auto.launches_per_step - 30   # 38 solve launches -> 1
    # the rows say which build and which reset ran
    assert one.params["newton_build"] and "newton_build" not in auto.params
    assert one.params["reset"] == auto.params["reset"] == "fused"
    assert any(NEWTON_KERNEL in k for k in one.by_kernel["kernel"]), one.by_kernel["kernel"].tolist()
    with pytest.raises(ConfigError, match="--solver-loop must be one of"):
        P.profile("simple", solver_loop="fast", **kw)


def test_latest_rows_keep_each_solve_apart_and_the_solve_table_sets_them_side_by_side(tmp_path):
    """A newer single-launch row neither replaces MuJoCo Warp's in the stage figure's rows nor is
    lost: ``solve=None`` keeps the newest of each, and the solve table puts them side by side."""
    from fightlab.paths import REPO_ROOT

    rows = results.read_rows("profile", REPO_ROOT)
    base = P.latest_rows(rows)
    assert set(base["solve"]) == {"MuJoCo Warp"} and not base.duplicated(["body", "nworld", "gpu"]).any()
    card = "NVIDIA test card"  # rows of a card of its own: the committed ones stay as they are
    one = base[(base["body"] == "simple") & (base["nworld"] == 1024)].iloc[[0]].assign(gpu=card)
    single = one.assign(time="2099-01-01T00:00:00+00:00", launches_per_step=43.0, constraint_solve_ms_per_step=0.1,
                        params=[json.dumps(dict(json.loads(one["params"].iloc[0]), solver_loop="single_launch"))])
    both = pd.concat([rows, one.drop(columns="solve"), single.drop(columns="solve")], ignore_index=True)
    mine = P.latest_rows(both)
    assert mine[mine["gpu"] == card]["launches_per_step"].tolist() == one["launches_per_step"].tolist()
    every = P.latest_rows(both, solve=None)
    assert sorted(every[every["gpu"] == card]["solve"]) == ["MuJoCo Warp", "single-launch"]
    table = P.solve_table(both[both["gpu"] == card])
    pair = table[table["body"] == "simple"].set_index("solve")
    assert pair.loc["single-launch", "launches_per_step"] == 43.0
    assert pair.loc["MuJoCo Warp", "launches_per_step"] == one["launches_per_step"].iloc[0]
    want = 0.1 / one["kernel_ms_per_step"].iloc[0]
    assert pair.loc["single-launch", "constraint_solve_share"] == pytest.approx(want)
    assert P.solve_table(both, nworld=3).empty
    with pytest.raises(ValueError, match="solve must be None or one of 'MuJoCo Warp', 'single-launch', got 'mujoco warp'"):
        P.latest_rows(both, solve="mujoco warp")
    # a newer row of the reference physics never stands for the training physics' row
    ref = one.assign(time="2099-01-02T00:00:00+00:00", launches_per_step=99.0, params=[json.dumps(dict(
        json.loads(one["params"].iloc[0]), iterations=10, ls_iterations=20, qacc_smooth=True, eulerdamp=True))])
    with_ref = pd.concat([both, ref.drop(columns="solve")], ignore_index=True)
    assert P.latest_rows(with_ref)[lambda d: d["gpu"] == card]["launches_per_step"].tolist() == [one["launches_per_step"].iloc[0]]
    assert P.latest_rows(with_ref, physics="reference")[lambda d: d["gpu"] == card]["launches_per_step"].tolist() == [99.0]
    assert sorted(P.latest_rows(with_ref, physics=None)[lambda d: d["gpu"] == card]["physics"]) == ["reference", "training"]
    assert P.solve_table(with_ref[with_ref["gpu"] == card]).set_index("solve").loc["MuJoCo Warp", "launches_per_step"] == \
        one["launches_per_step"].iloc[0]
    assert P.physics_of({}) == "other" and P.physics_of(dict(iterations=3, ls_iterations=4)) == "other"
    with pytest.raises(ValueError, match="physics must be None or one of 'training', 'reference', 'other', got 'train'"):
        P.latest_rows(both, physics="train")
    # a card with single-launch rows only: its stage figure is skipped, with a line
    from fightlab.figures import draw

    only = single.assign(gpu="NVIDIA H100 test card")  # a card with no MuJoCo Warp row
    results.append_row("profile", {k: (None if isinstance(v, float) and v != v else v)
                                   for k, v in only.iloc[0].to_dict().items() if k not in ("solve", "physics")}, tmp_path)
    said = []
    assert draw(only=["profile_stages"], root=tmp_path, log=said.append) == {"profile_stages": []}
    assert any("single-launch solve only" in s for s in said), said
