"""`python -m fightlab export` and `evaluate --policy`: a tiny trained checkpoint of each body to
ONNX (parity with torch on recorded observations), its replay in MuJoCo's C engine, and every
bad input refused in one line with nothing written."""

import hashlib
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
