"""`python -m fightlab export` and `evaluate --policy`: a tiny trained checkpoint of each body to
ONNX (parity with torch on recorded observations), its replay in MuJoCo's C engine, and every
bad input refused in one line with nothing written."""

import hashlib
import json
import os
import pickle

import pytest
import torch

from fightlab.cli import main
from fightlab.config import PPOConfig, TrainConfig
from fightlab.run.runner import Trainer

onnx = pytest.importorskip("onnx", reason="the export extra (pip install -e '.[export]') is not installed")
ort = pytest.importorskip("onnxruntime", reason="the export extra (pip install -e '.[export]') is not installed")
pytest.importorskip("onnxscript", reason="the export extra (pip install -e '.[export]') is not installed")


@pytest.fixture(scope="module", params=["simple", "muscular-fast"])
def exported(request, tmp_path_factory):
    """(checkpoint, export result) of a tiny 1-iteration run of each body."""
    from fightlab.run.export import export_policy

    d = tmp_path_factory.mktemp(request.param)
    cfg = TrainConfig(body=request.param, nworld=4, device="cpu", seed=7, max_iterations=1, run_dir=str(d / "run"),
                      checkpoint_every=1, ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1))
    t = Trainer(cfg, progress=False)
    t.train()
    t.close()
    ck = d / "run" / "latest.pt"
    return ck, export_policy(ck, progress=False)


def test_export_writes_a_policy_with_its_metadata_and_parity(exported):
    ck, r = exported
    assert r["path"] == str(ck.parent / "policy.onnx") and r["n_obs"] >= 1000 and r["max_abs_diff"] <= 1e-5
    print(f"parity {r['body']}: max |Δaction| = {r['max_abs_diff']:.3g} on {r['n_obs']} observations")
    model = onnx.load(r["path"])
    meta = {m.key: m.value for m in model.metadata_props}
    saved = torch.load(ck, weights_only=False)
    assert meta["fightlab_body"] == r["body"] and int(meta["iteration"]) == saved["iteration"] == 1
    assert meta["run_id"] == saved["run_id"] and int(meta["obs_dim"]) == r["obs_dim"] and meta["commit"]
    assert not list(ck.parent.glob("*.tmp"))


def test_exported_policy_replays_in_the_c_engine(exported, capsys):
    from fightlab.results import read_rows

    ck, r = exported
    args = ["evaluate", "--policy", r["path"], "--backend", "cpu", "--device", "cpu", "--nworld", "2",
            "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err
    row = read_rows("evaluate", root=os.environ["FIGHTLAB_RUNS"] + "/eval").iloc[-1]
    params = row["params"] if isinstance(row["params"], dict) else __import__("json").loads(row["params"])
    assert params["backend"] == "cpu" and params["policy"] == r["path"] and params["physics_engine"]
    assert params["policy_sha256"] == hashlib.sha256(open(r["path"], "rb").read()).hexdigest()
    assert row["body"] == r["body"] and params["ckpt_iteration"] == 1


def test_a_policy_of_another_body_is_refused(exported, tmp_path, capsys):
    ck, r = exported
    other = "simple" if r["body"] == "muscular-fast" else "muscular-fast"
    model = onnx.load(r["path"])
    for m in model.metadata_props:
        if m.key == "config":
            m.value = m.value.replace(f'"body": "{r["body"]}"', f'"body": "{other}"')
        if m.key == "fightlab_body":
            m.value = other
    p = tmp_path / "other.onnx"
    onnx.save(model, p)
    assert main(["evaluate", "--policy", str(p), "--backend", "cpu", "--device", "cpu", "--nworld", "1",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the env's compile note
    assert err.startswith("fightlab: error: policy") and f"of body {other}" in err


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _bad_inputs(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    evil = tmp_path / "evil.pt"
    torch.save({"format": "fightlab-ckpt-1", "x": _Evil(tmp_path / "ran")}, evil, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return text, evil


def test_bad_input_is_one_line_and_writes_nothing(exported, tmp_path, capsys):
    ck, _ = exported
    text, evil = _bad_inputs(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    cases = [(["export", str(text)], "not a checkpoint torch can read"),
             (["export", str(evil)], "holds objects other than"),
             (["export", str(tmp_path / "missing.pt")], "does not exist"),
             (["export", str(ck), "--out", str(tmp_path / "nowhere")], "is not an existing folder"),
             (["evaluate", "--policy", str(text), "--device", "cpu"], "is not an ONNX file"),
             (["evaluate", "--policy", str(tmp_path / "missing.onnx"), "--device", "cpu"], "does not exist"),
             (["evaluate", str(ck), "--policy", str(text), "--device", "cpu"], "replaces CHECKPOINT")]
    if os.geteuid() != 0:  # root writes anywhere
        cases.append((["export", str(ck), "--out", str(ro)], "is not writable"))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for args, expect in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith("fightlab: error: ") and expect in err and "\n" not in err, (args, err)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and not (tmp_path / "ran").exists()


def test_an_onnx_file_that_is_not_a_policy_is_refused(tmp_path, capsys):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    p = tmp_path / "relu.onnx"
    onnx.save(model, p)
    assert main(["evaluate", "--policy", str(p), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a fightlab policy" in err and "\n" not in err


def test_missing_onnxruntime_says_how_to_install(monkeypatch, tmp_path, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    text, _ = _bad_inputs(tmp_path)
    assert main(["export", str(text)]) == 2
    err = capsys.readouterr().err.strip()
    assert "onnxruntime not installed" in err and "pip install -e '.[export]'" in err and "\n" not in err


def test_parity_worse_than_the_tolerance_writes_nothing(exported, tmp_path, monkeypatch, capsys):
    import fightlab.run.export as export

    ck, r = exported
    if r["body"] != "simple":
        pytest.skip("one body is enough for the refusal")
    assert main(["export", str(ck), "--out", str(tmp_path), "--no-progress"]) == 0  # --out given
    assert (tmp_path / "policy.onnx").is_file() and "on 1000 observations" in capsys.readouterr().out
    (tmp_path / "policy.onnx").unlink()
    monkeypatch.setattr(export, "PARITY_TOL", -1.0)  # no file can pass
    assert main(["export", str(ck), "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "differ from torch's by up to" in err and "on 1000 observations; nothing written" in err
    assert list(tmp_path.iterdir()) == []


def _only_simple(r):
    if r["body"] != "simple":
        pytest.skip("one body is enough for these refusals")


def _no_env(monkeypatch):
    """Any env built from here on fails the test: a refusal must come before it."""
    import fightlab.envs.task

    def built(*a, **k):
        raise AssertionError("the env was built before the refusal")

    monkeypatch.setattr(fightlab.envs.task, "evaluate_policy", built)


def _crafted(path, tmp_path):
    """name -> a crafted copy of the exported policy at ``path`` (built with the onnx package)."""
    import copy
    import json

    from onnx import TensorProto, helper

    base = onnx.load(path)
    meta = {m.key: m.value for m in base.metadata_props}
    out = base.graph.output[0].name

    def with_meta(**kw):
        m = copy.deepcopy(base)
        del m.metadata_props[:]
        for k, v in dict(meta, **kw).items():
            m.metadata_props.add(key=k, value=v)
        return m

    def config(**kw):
        return json.dumps(dict(json.loads(meta["config"]), **kw))

    def rewired(m, name):  # the graph's last node now writes `name`; its output is free to recompute
        for n in m.graph.node:
            n.output[:] = [name if v == out else v for v in n.output]
        return m

    made = {"deep_json": with_meta(config="[" * 200_000 + "]" * 200_000),
            "workers_neg": with_meta(config=config(workers=-3)), "workers_str": with_meta(config=config(workers="7"))}
    m = copy.deepcopy(base)  # the input float64, cast inside
    m.graph.input[0].name, m.graph.input[0].type.tensor_type.elem_type = "obs_d", TensorProto.DOUBLE
    m.graph.node.insert(0, helper.make_node("Cast", ["obs_d"], ["obs"], to=TensorProto.FLOAT))
    made["double_input"] = m
    m = rewired(copy.deepcopy(base), "pre")  # a custom op of an unknown domain
    m.graph.node.append(helper.make_node("EvilOp", ["pre"], [out], domain="evil.domain"))
    m.opset_import.append(helper.make_opsetid("evil.domain", 1))
    made["custom_op"] = m
    m = copy.deepcopy(base)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 99
    made["opset99"] = m
    m = rewired(copy.deepcopy(base), "pre")  # the output 2·nu wide, its declared shape unchanged
    m.graph.node.append(helper.make_node("Concat", ["pre", "pre"], [out], axis=1))
    made["wide_output"] = m
    m = copy.deepcopy(base)  # the input renamed: a policy all the same
    m.graph.input[0].name = "x"
    for n in m.graph.node:
        n.input[:] = ["x" if v == "obs" else v for v in n.input]
    made["renamed_input"] = m
    paths = {}
    for name, m in made.items():
        paths[name] = tmp_path / f"{name}.onnx"
        onnx.save(m, paths[name])
    return paths


def test_crafted_policy_files_are_one_line_before_the_env(exported, tmp_path, capsys, monkeypatch):
    from fightlab.results import read_rows

    ck, r = exported
    _only_simple(r)
    files = _crafted(r["path"], tmp_path)
    expect = {"deep_json": "nests 200000 deep", "workers_neg": "workers must be a positive integer, got -3",
              "workers_str": "workers must be a positive integer, got '7'",
              "double_input": "must take one float32 input", "custom_op": "is not a policy onnxruntime can run",
              "opset99": "is not a policy onnxruntime can run", "wide_output": "[batch, 37]"}
    with monkeypatch.context() as m:
        _no_env(m)
        for name, say in expect.items():
            args = ["evaluate", "--policy", str(files[name]), "--backend", "cpu", "--device", "cpu", "--nworld", "4",
                    "--no-progress"]
            assert main(args) == 2, name
            err = capsys.readouterr().err.strip()
            assert err.startswith("fightlab: error: policy") and say in err and "\n" not in err, (name, err)
            assert str(files[name]) in err, (name, err)
    # the renamed input runs (by its own name), given by a relative path: the row names it absolute
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--policy", "renamed_input.onnx", "--backend", "cpu", "--device", "cpu", "--nworld",
                 "1", "--no-progress"]) == 0, capsys.readouterr().err
    row = read_rows("evaluate", root=os.environ["FIGHTLAB_RUNS"] + "/eval").iloc[-1]
    params = row["params"] if isinstance(row["params"], dict) else __import__("json").loads(row["params"])
    assert params["policy"] == str(files["renamed_input"].resolve())


def test_evaluate_policy_body_and_publish_refusals(exported, capsys, monkeypatch):
    ck, r = exported
    _only_simple(r)
    _no_env(monkeypatch)
    base = ["evaluate", "--policy", r["path"], "--backend", "cpu", "--device", "cpu", "--nworld", "1", "--no-progress"]
    assert main(base + ["--body", "muscular-fast"]) == 2
    err = capsys.readouterr().err
    assert "--body muscular-fast conflicts with the policy's body (simple)" in err and "\n" not in err.strip()
    assert main(["evaluate", "--policy", r["path"], "--backend", "gpu", "--device", "cpu", "--nworld", "1",
                 "--no-progress", "--publish"]) == 2
    err = capsys.readouterr().err.strip()  # MuJoCo Warp on warp's CPU device: a smoke check, never published
    assert "--device cuda:N" in err and "\n" not in err


def test_a_c_engine_evaluation_publishes_a_row_that_names_the_cpu(exported, monkeypatch, tmp_path, capsys):
    """`evaluate --policy P --backend cpu --publish` (MuJoCo's C engine on the CPU) passes the
    publish rule: its row names the CPU in the gpu column and passes the write-time check."""
    from fightlab import meta, publish, results
    from fightlab.measure import report
    from fightlab.results.files import check_committed

    ck, r = exported
    _only_simple(r)
    written = []
    real = results.publish_row
    monkeypatch.setattr(report.results, "publish_row", lambda exp, row, publish, local, device: (
        written.append((exp, dict(row), publish)), real(exp, row, publish, tmp_path / "local", device, root=tmp_path)))
    args = ["evaluate", "--policy", r["path"], "--backend", "cpu", "--device", "cpu", "--nworld", "2",
            "--no-progress", "--publish"]
    assert main(args) == 2 and not written  # 2 worlds: a smoke check, not a published row
    assert "below 256, the smallest world count of a published row" in capsys.readouterr().err
    monkeypatch.setattr(publish, "MIN_PUBLISH_NWORLD", 2)  # this test's tiny size
    assert main(args) == 0
    (exp, row, publish_), = written
    assert exp == "evaluate" and publish_ and meta.is_cpu_label(row["gpu"]) and json.loads(row["params"])["backend"] == "cpu"
    check_committed(results.results_path("evaluate", results.REPO_ROOT), "the evaluation row", "cpu",
                    backend="cpu")  # the repository's rule at write time for this row: passes
    assert len(results.read_rows("evaluate", tmp_path)) == 1


def test_missing_onnxruntime_refuses_evaluate_before_the_env(exported, monkeypatch, capsys):
    import sys

    ck, r = exported
    _only_simple(r)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    _no_env(monkeypatch)
    assert main(["evaluate", "--policy", r["path"], "--backend", "cpu", "--device", "cpu", "--nworld", "1",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "onnxruntime not installed" in err and "\n" not in err.strip()


def test_export_never_replaces_or_deletes_what_it_did_not_write(exported, tmp_path, capsys, monkeypatch):
    from fightlab.rundir import lock_file

    ck, r = exported
    _only_simple(r)
    from fightlab.run.export import EXPORT_LOCK
    mine, linked, spare, odd = (tmp_path / n for n in ("mine", "linked", "spare", "odd"))
    for d in (mine, linked, spare, odd):
        d.mkdir()
    (mine / "policy.onnx").write_text("the user's own\n")
    (tmp_path / "target.txt").write_text("the link's target\n")
    (linked / "policy.onnx").symlink_to(tmp_path / "target.txt")
    (spare / "policy.onnx.tmp").write_text("the user's temporary\n")
    (odd / EXPORT_LOCK).write_text("a user's note at the lock's name\n")
    cases = [(mine, "is not a policy fightlab's export wrote"), (linked, "is a link"), (odd, "not an export's lock")]
    if os.geteuid() == 0 and os.path.isdir("/sys/kernel"):  # writable to os.access, takes no file
        cases.append((__import__("pathlib").Path("/sys/kernel"), "takes no file"))
    with monkeypatch.context() as m:
        _no_env(m)
        for d, say in cases:
            assert main(["export", str(ck), "--out", str(d), "--no-progress"]) == 2, d
            err = capsys.readouterr().err.strip()
            assert err.startswith("fightlab: error: ") and say in err and "\n" not in err, (d, err)
    assert (mine / "policy.onnx").read_text() == "the user's own\n" and os.listdir(mine) == ["policy.onnx"]
    assert (linked / "policy.onnx").is_symlink() and (tmp_path / "target.txt").read_text() == "the link's target\n"
    assert sorted(os.listdir(odd)) == [EXPORT_LOCK]
    # a user's policy.onnx.tmp is no temporary of ours; fightlab's own policy.onnx is replaced
    for _ in range(2):
        assert main(["export", str(ck), "--out", str(spare), "--no-progress"]) == 0, capsys.readouterr().err
        assert sorted(os.listdir(spare)) == ["policy.onnx", "policy.onnx.tmp"]
        assert (spare / "policy.onnx.tmp").read_text() == "the user's temporary\n"
    capsys.readouterr()
    # another export holding the folder: the second is refused, nothing changed
    before = (spare / "policy.onnx").read_bytes()
    fd, _ = lock_file(spare / EXPORT_LOCK)
    try:
        with monkeypatch.context() as m:
            _no_env(m)
            assert main(["export", str(ck), "--out", str(spare), "--no-progress"]) == 2
    finally:
        os.close(fd)
    err = capsys.readouterr().err.strip()
    assert f"another export (pid {os.getpid()})" in err and "\n" not in err
    assert (spare / "policy.onnx").read_bytes() == before
