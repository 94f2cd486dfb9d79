"""The trainer after its split and the fused reward terms, on CUDA: a short training per body.

    python3 bench/gpu_check_s13.py RUN_DIR [RUN_DIR ...]

Per run folder: iterations, host reads and graph fallbacks per iteration (1 and 0 expected), the
median rollout / update seconds of iterations 6 onward, and the reward terms' columns against
the reward: their sum over an iteration divided by the iteration's env steps is the mean reward
per env step (the `reward` column), up to float32 rounding.
"""

import sys

import pandas as pd

for d in sys.argv[1:]:
    rows = pd.read_csv(f"{d}/rows.csv")
    late = rows[rows["iteration"] > 5]
    terms = [c for c in rows.columns if c.startswith("reward_")]
    per_iter = rows["env_steps"] / rows["iteration"]
    total = rows[terms].sum(axis=1) / per_iter
    err = ((total - rows["reward"]).abs() / rows["reward"].abs().clip(lower=1e-6)).max()
    print(f"{d}: {len(rows)} iterations, host_reads {sorted(rows['host_reads'].unique())}, "
          f"graph_fallbacks {sorted(rows['graph_fallbacks'].unique())}, rollout "
          f"{late['rollout_s'].median():.4f} s + update {late['update_s'].median():.4f} s, "
          f"terms {[t.removeprefix('reward_') for t in terms]}, max relative |sum(terms) - reward| {err:.2e}")
    assert (rows["host_reads"] == 1).all() and (rows["graph_fallbacks"] == 0).all()
    assert terms and err < 1e-4
print("GPU CHECK PASS")
