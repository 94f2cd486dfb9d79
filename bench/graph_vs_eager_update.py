"""Measures (CUDA) how far one training iteration with every graph lands from one without, and
each from a second run of its own kind, same seed: the largest parameter difference per tensor.
Two CUDA rollouts of one seed differ in the last bits (MuJoCo Warp's atomics), so whole runs
part by ~1e-2 after one update even when both are eager (bench/NOTES.md, 2026-12-05).

    PYTHONPATH=. python bench/graph_vs_eager_update.py      # on a GPU machine, from the repository root
"""
import tempfile
from pathlib import Path
import torch
from fightlab.config import PPOConfig, TrainConfig
from fightlab.run.runner import Trainer

tmp = Path(tempfile.mkdtemp())
out = {}
for name, pol, upd in (("both", True, True), ("none", False, False), ("none2", False, False), ("both2", True, True)):
    cfg = TrainConfig(body="simple", nworld=256, device="cuda:0", max_iterations=1, seed=0,
                      run_dir=str(tmp / name), stop_when_solved=False,
                      ppo=PPOConfig(desired_kl=1.0), policy_graph=pol, update_graph=upd)
    with Trainer(cfg, progress=False) as tr:
        row = tr.train()["rows"][0]
        out[name] = ({k: v.detach().cpu().clone() for k, v in tr.agent.state_dict().items()}, float(tr.lr), row)
ref = out["none"][0]
for name in ("both", "none2", "both2"):
    p = out[name][0]
    if name == "both2":
        ref = out["both"][0]
    diffs = sorted(((float((p[k] - ref[k]).abs().max()), k) for k in p), reverse=True)[:6]
    print(name, "lr", out[name][1], out["none"][1], "reward", out[name][2]["reward"], out["none"][2]["reward"])
    for d, k in diffs:
        print(f"   {k:40s} {d:.3e}")
