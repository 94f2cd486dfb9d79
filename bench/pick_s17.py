"""Session 17's adoption rule (bench/NOTES.md "Session 17", written before the runs), applied to
the published rows: per body, the study's variants (commit given) against the critic study's
policy arm (commit 4fdbd27, seeds 1, 2, K = 8), estimated solo time to solve = mean iterations ×
solo s/it of the variant's physics (+ its update's extra cost, scaled by the batch's update time
against the batch's clip-0.4 arm, whose update has today's shape).

    .venv/bin/python bench/pick_s17.py COMMIT [COMMIT ...]
"""
import sys

import pandas as pd

from fightlab.measure import report

SOLO = {  # solo rollout, update s/it (session 16's solo rows, bench/NOTES.md)
    ("simple", 2): (0.119, 0.015), ("simple", 1): (0.106, 0.015),
    ("muscular-fast", 2): (0.194, 0.019), ("muscular-fast", 1): (0.168, 0.019),
}
CONTROL_COMMIT = "4fdbd27"

runs = report.published_runs()
commits = sys.argv[1:]
stages = report.run_stages(runs[runs["commit"].isin([CONTROL_COMMIT, *commits])])
rows = []
for r in runs[runs["commit"].isin([CONTROL_COMMIT, *commits])].itertuples():
    import json

    p = json.loads(r.params)
    changes = report.learner_changes(p)
    if r.commit == CONTROL_COMMIT and (changes != "defaults" or r.concurrent != 8 or r.seed not in (1, 2)):
        continue
    newton = int(p["env"]["solver_iterations"])
    rows.append(dict(body=r.body, arm="control" if r.commit == CONTROL_COMMIT else changes, seed=r.seed,
                     solved=bool(r.solved), reference=r.reference, iterations=r.iterations,
                     stage0=stages["stage0"].get(r.run_id), update_s=r.update_s_per_iter, newton=newton))
df = pd.DataFrame(rows)
print(df.sort_values(["body", "arm", "seed"]).to_string(index=False))
out = []
for (body, arm), g in df.groupby(["body", "arm"]):
    ok = len(g) >= 2 and g["solved"].all() and g["seed"].nunique() >= 2
    roll, upd = SOLO[(body, int(g["newton"].iloc[0]))]
    ref = df[(df.body == body) & df.arm.str.startswith("ppo.clip_coef=0.4")]
    scale = g["update_s"].mean() / ref["update_s"].mean() if arm != "control" and len(ref) else 1.0
    est = g["iterations"].mean() * (roll + upd * scale)
    out.append(dict(body=body, arm=arm, n=len(g), eligible=ok, stage0_mean=g["stage0"].mean(),
                    iterations_mean=g["iterations"].mean(), update_scale=round(scale, 2), est_solo_s=round(est, 1)))
t = pd.DataFrame(out)
for body, g in t.groupby("body"):
    ctrl = float(g[g.arm == "control"]["est_solo_s"].iloc[0])
    t.loc[g.index, "vs_control"] = (g["est_solo_s"] / ctrl - 1).round(3)
t["adopt"] = t["eligible"] & (t["vs_control"] < -0.05) & (t["arm"] != "control")
print(t.sort_values(["body", "est_solo_s"]).to_string(index=False))
