"""Throughput of K trainings packed per GPU (the K-scan), on one GPU or several, from a finished
batch folder.

    python -m fightlab batch --job 'train --body simple --nworld 1024 --max-iterations 70' \
        --grid seed=1,2,3,4 --concurrent 4 --batch-dir runs/batch/k4-mps [--gpus all]
    python -m fightlab.measure.packing runs/batch/k4-mps [--skip 24] [--publish]

One ``packing`` row per batch (`results.EXPERIMENTS["packing"]`): the batch's K (``concurrent``:
trainings at once per GPU), its GPU count (``gpus``: the GPU lanes that ran its trainings) and
whether CUDA MPS ran, the median over its trainings of each training's median seconds per
iteration (iterations skip+1 … last), the aggregate iterations per second of all its GPUs, K ×
gpus / that median, and its solves per hour (trainings solved / the batch's wall-clock hours,
first start to last end; empty when none solved or the batch was resumed). Speed-up against solo
or one GPU is a ratio of two rows (same commit, body, nworld), taken by the figure, not stored.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from fightlab import results
from fightlab.config import ConfigError
from fightlab.paths import REPO_ROOT


def _state(folder: Path | str) -> dict:
    """A batch folder's batch.json (ConfigError when it has none)."""
    path = Path(folder) / "batch.json"
    if not path.is_file():
        raise ConfigError(f"{folder}: no batch.json (not a fightlab batch folder)")
    return json.loads(path.read_text())


def batch_runs(folder: Path | str) -> list[Path]:
    """The run folders of a batch's training jobs that have rows (ConfigError without batch.json)."""
    state = _state(folder)
    return [Path(j["run_dir"]) for j in state.get("jobs", [])
            if j.get("run_dir") and (Path(j["run_dir"]) / "rows.csv").is_file()]


def batch_packing(state: dict) -> tuple[int, int]:
    """(GPUs, K) of a batch's batch.json: the GPU lanes its jobs ran on (1 for a CPU or
    one-GPU batch) and the trainings at once per GPU, min(--concurrent, ceil(jobs / GPUs))."""
    jobs = state.get("jobs", [])
    gpus = len({j["lane"] for j in jobs if str(j.get("lane") or "").startswith("gpu")}) or 1
    return gpus, min(int(state.get("concurrent") or 1), -(-len(jobs) // gpus) or 1)


def solves_per_hour(state: dict, runs: list[Path]) -> float | None:
    """Trainings of ``runs`` whose train row says solved, per wall-clock hour of the batch (its
    first job's start to its last job's end, batch.json); None when none solved or the batch was
    resumed (its attempts' times are the last stretch's only)."""
    solved = 0
    for r in runs:
        row = r / "data" / "results" / "train.csv"
        if row.is_file():
            solved += int(pd.read_csv(row)["solved"].map(lambda v: str(v).lower() in ("true", "1", "1.0")).sum())
    spans = [(j["started"], j["ended"]) for j in state.get("jobs", []) if j.get("started") and j.get("ended")]
    if not solved or not spans or state.get("resumes"):
        return None
    hours = (max(e for _, e in spans) - min(s for s, _ in spans)) / 3600.0
    return solved / hours if hours > 0 else None


def batch_row(folder: Path | str, skip: int = 3, until: int | None = None) -> dict:
    """The ``packing`` row (not written) of a batch folder whose trainings ran (batch.json, each
    run's rows.csv and latest.pt, whose config gives body, nworld, device): each training's
    median over iterations skip+1 … ``until`` (None: the last; trainings run to a solve pack K
    only while all K run).

    Raises:
      CheckpointError: a latest.pt unreadable or refused by a weights-only load (none of it runs);
      ConfigError: no batch.json, a negative `skip`, `until` not above `skip`, no training with
        more than `skip` iterations, trainings of different bodies or world counts.
    """
    from fightlab.run.checkpoint import safe_load

    if skip < 0:
        raise ConfigError(f"skip={skip} must be >= 0 (iterations left out at the start)")
    if until is not None and until <= skip:
        raise ConfigError(f"until={until} must be above skip={skip} (iterations skip+1 … until are counted)")
    runs, state = batch_runs(folder), _state(folder)
    med, cfgs = [], []
    for r in runs:
        rows = pd.read_csv(r / "rows.csv")
        last = until if until is not None else np.inf
        rows = rows[(rows["iteration"] > skip) & (rows["iteration"] <= last)]
        if len(rows):
            med.append(float(np.median(rows["wall_s"])))
            ck = safe_load(r / "latest.pt")  # tensors, numbers, text only: no code in it runs
            cfgs.append(ck["config"])
    if not med:
        raise ConfigError(f"{folder}: no training with more than {skip} iterations (skip={skip})")
    kinds = {(c["body"], c["nworld"]) for c in cfgs}
    if len(kinds) > 1:
        raise ConfigError(f"{folder}: trainings of different bodies or world counts {sorted(kinds)}; "
                          "a packing row is one body and nworld")
    body, nworld = kinds.pop()
    gpus, k = batch_packing(state)
    s_it = float(np.median(med))
    params = dict(batch_id=state.get("batch_id"), skip=skip, lanes=state.get("lanes"),
                  seeds=sorted(c["seed"] for c in cfgs))
    if until is not None:
        params["until"] = until
    meta = results.run_metadata(body=body, nworld=int(nworld), seed=0, params=params,
                                device=cfgs[0]["device"])
    metrics = dict(concurrent=k, mps=bool(state.get("mps")), runs=len(med), s_per_iter=s_it,
                   it_per_s_aggregate=k * gpus / s_it, s_per_iter_min=float(min(med)),
                   s_per_iter_max=float(max(med)), gpus=gpus, solves_per_hour=solves_per_hour(state, runs))
    return {**meta, **{c: metrics[c] for c in results.EXPERIMENTS["packing"]}}


def publish_batch(folder: Path | str, root: Path | str, skip: int = 3, until: int | None = None) -> dict:
    """Append `batch_row(folder, skip, until)` to ``root/data/results/packing.csv`` (the publish
    rule applies to the repository's data/: a CUDA device) and return it."""
    row = batch_row(folder, skip, until)
    results.append_row("packing", row, root)
    return row


def main(argv: list[str] | None = None) -> int:
    """`python -m fightlab.measure.packing FOLDER... [--skip N] [--until N] [--publish]`: print (and with
    --publish append to the repository's data/results/packing.csv) one row per batch folder."""
    p = argparse.ArgumentParser(prog="python -m fightlab.measure.packing", description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", help="batch folders (runs/batch/<id>)")
    p.add_argument("--skip", type=int, default=3, help="iterations left out of each run's median")
    p.add_argument("--until", type=int, default=None,
                   help="last iteration counted (trainings run to a solve: the stretch where all K run)")
    p.add_argument("--publish", action="store_true", help="GPU rows only: append to data/results/packing.csv")
    a = p.parse_args(argv)
    try:
        rows = [publish_batch(f, REPO_ROOT, a.skip, a.until) if a.publish else batch_row(f, a.skip, a.until) for f in a.folders]
    except (ConfigError, ValueError, OSError) as e:
        print(f"fightlab: error: {e}", file=sys.stderr)
        return 2
    cols = ["body", "nworld", "gpus", "concurrent", "mps", "runs", "s_per_iter", "it_per_s_aggregate",
            "solves_per_hour"]
    print(pd.DataFrame(rows)[cols].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
