"""CLI errors: one clear line naming the bad value, exit code 2, no traceback."""

import subprocess
import sys

import pytest

from fightlab.cli import main


@pytest.mark.parametrize("args, expect", [
    (["train", "--body", "robot"], "unknown body 'robot'; valid bodies: muscular-fast, simple"),
    (["train", "--nworld", "0"], "nworld must be a positive integer, got 0"),
    (["train", "--nworld", "-5"], "nworld must be a positive integer, got -5"),
    (["train", "--nworld", "1.5"], "nworld must be a positive integer, got '1.5'"),
    (["train", "--nworld", "lots"], "nworld must be a positive integer, got 'lots'"),
    (["train", "--device", "tpu"], "device must be 'cpu', 'cuda' or 'cuda:N', got 'tpu'"),
    (["train", "--set", "ppo.nope=1"], "unknown field 'ppo.nope'"),
    (["evaluate", "missing.pt"], "checkpoint 'missing.pt' does not exist"),
])
def test_cli_errors(args, expect, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err, err
    assert "Traceback" not in err


def test_cuda_without_gpu_is_a_clear_error(capsys):
    import warp as wp

    wp.init()
    if wp.get_cuda_device_count() > 0:
        pytest.skip("this machine has a GPU")
    assert main(["train", "--device", "cuda", "--nworld", "4"]) == 2
    err = capsys.readouterr().err
    assert "'cuda'" in err and "no CUDA GPU" in err


def test_truncated_checkpoint_cli(tmp_path, capsys):
    p = tmp_path / "cut.pt"
    import torch

    torch.save({"format": "fightlab-ckpt-1", "payload": list(range(1000))}, p)
    p.write_bytes(p.read_bytes()[:200])  # cut short
    assert main(["evaluate", str(p)]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and "unreadable or truncated" in err


def test_module_entry_point_reports_errors_without_traceback():
    r = subprocess.run([sys.executable, "-m", "fightlab", "train", "--body", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "valid bodies: muscular-fast, simple" in r.stderr and "Traceback" not in r.stderr
