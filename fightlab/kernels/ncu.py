"""Nsight Compute profiles of the mass-matrix factor kernels as result rows (issue 6: where the time goes).

``bench/gpu_lanes.sh``'s ``ncu:NWORLD`` job runs ``bench/factor_probe.py`` under ``ncu --csv``
(sections SpeedOfLight, Occupancy, WarpStateStats, MemoryWorkloadAnalysis) and then publishes it:

    python -m fightlab.kernels.ncu RAW.csv NWORLD [--root .] [--factorizations 4]

One ``ncu`` row per factor path (``params.path``: ``stock`` = MuJoCo Warp's per-level
``_qLD_acc``, ``global`` / ``shared`` = fightlab's single launch), medians over that path's
launches; ``duration_us_per_factorization`` sums the path's kernel durations over its launches
and divides by the factorizations profiled (the probe: one warm-up + 3 timed calls per path =
4). Durations are ncu's (each launch replayed alone with caches flushed and clocks unlocked:
``--clock-control none``), so they are not the benchmark's times; the occupancy, issue and
hit-rate metrics are what this table is for. Metric names are NVIDIA's, from the CSV.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

import pandas as pd

from fightlab import results

#: kernel-name prefix (as Warp names them in the CUDA module) -> factor path
KERNELS = {"_qLD_acc": "stock", "_factor_tree": "global", "_shared_kernel": "shared"}

#: metric column -> Nsight Compute metric name (section "GPU Speed Of Light Throughput",
#: "Occupancy", "Warp State Statistics", "Memory Workload Analysis")
METRICS = {
    "duration_us": "Duration",
    "elapsed_cycles": "Elapsed Cycles",
    "sm_active_cycles": "SM Active Cycles",
    "warp_cycles_per_issued_instruction": "Warp Cycles Per Issued Instruction",
    "active_threads_per_warp": "Avg. Active Threads Per Warp",
    "achieved_occupancy_pct": "Achieved Occupancy",
    "theoretical_occupancy_pct": "Theoretical Occupancy",
    "achieved_warps_per_sm": "Achieved Active Warps Per SM",
    "compute_throughput_pct": "Compute (SM) Throughput",
    "memory_throughput_pct": "Memory Throughput",
    "dram_throughput_pct": "DRAM Throughput",
    "l1_hit_rate_pct": "L1/TEX Hit Rate",
    "l2_hit_rate_pct": "L2 Hit Rate",
}

# the row schema lives in fightlab.results (EXPERIMENTS["ncu"]); this table must fill it
assert results.EXPERIMENTS["ncu"] == ("launches", "block_size", "grid_size",
                                      "duration_us_per_factorization", *METRICS)


def read_csv(path: Path | str) -> pd.DataFrame:
    """Nsight Compute's ``--csv`` log (the lines before the header are ncu's own messages) as a
    long table: one row per (launch ``ID``, metric), with ``path`` (:data:`KERNELS`; launches of
    other kernels dropped) and ``value`` (float; ncu's thousands separators removed; the
    "Memory Throughput" of the Memory Workload section, in byte/s, is dropped so the name means
    the Speed Of Light percentage).

    Raises:
        ValueError: no ncu header line, or no launch of a factor kernel (names the kernels seen).
    """
    lines = Path(path).read_text().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError(f"{path}: no Nsight Compute CSV header (a line starting with \"ID\")")
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])))
    prefix = df["Kernel Name"].str.extract("^(" + "|".join(map(re.escape, KERNELS)) + ")")[0]
    if prefix.isna().all():
        raise ValueError(f"{path}: no launch of {sorted(KERNELS)}; kernels seen: "
                         f"{sorted(df['Kernel Name'].str[:40].unique())}")
    df = df.assign(path=prefix.map(KERNELS)).dropna(subset=["path", "Metric Name"])
    df = df[~((df["Metric Name"] == "Memory Throughput") & (df["Metric Unit"] != "%"))]
    df["value"] = pd.to_numeric(df["Metric Value"].astype(str).str.replace(",", ""), errors="coerce")
    return df


def summarise(path: Path | str, factorizations: int = 4) -> pd.DataFrame:
    """One row per factor path: launches, block size (threads) and grid size (blocks) of its
    largest launch (the stock path's grid changes with the tree level), the medians of
    :data:`METRICS` over the path's launches (``duration_us`` in µs) and
    ``duration_us_per_factorization`` (sum of durations / ``factorizations``).

    Raises:
        ValueError: as :func:`read_csv`; ``factorizations`` < 1, or a path's launch count is not a
            multiple of it.
    """
    if not isinstance(factorizations, int) or factorizations < 1:
        raise ValueError(f"factorizations must be an int >= 1, got {factorizations!r}")
    df = read_csv(path)
    out = []
    for p, g in df.groupby("path", sort=False):
        wide = g.pivot_table(index="ID", columns="Metric Name", values="value", aggfunc="first")
        launches = len(wide)
        if launches % factorizations:
            raise ValueError(f"{path}: {launches} launches of the {p} path is not a multiple of "
                             f"factorizations={factorizations}")
        first_dim = lambda col: g.drop_duplicates("ID")[col].map(  # noqa: E731
            lambda v: int(str(v).strip("()").split(",")[0]))
        row = dict(path=p, launches=launches, block_size=int(first_dim("Block Size").max()),
                   grid_size=int(first_dim("Grid Size").max()))
        dur_ns = wide.get("Duration")
        row["duration_us_per_factorization"] = (float(dur_ns.sum()) * 1e-3 / factorizations
                                                if dur_ns is not None else float("nan"))
        for col, name in METRICS.items():
            v = float(wide[name].median()) if name in wide else float("nan")
            row[col] = v * 1e-3 if col == "duration_us" else v
        out.append(row)
    order = {p: i for i, p in enumerate(KERNELS.values())}
    return pd.DataFrame(out).sort_values("path", key=lambda s: s.map(order)).reset_index(drop=True)


def publish(path: Path | str, nworld: int, root: Path | str = ".", factorizations: int = 4,
            body: str = "muscular-fast", **meta: str) -> list[dict]:
    """Append one ``ncu`` row per factor path of ``path`` to ``root/data/results/ncu.csv``.

    ``meta`` overrides metadata columns (``gpu``, ``driver``, ``commit``, ``time``, ``torch``, …)
    for a profile published away from the machine that ran it; by default they describe this
    machine (:func:`fightlab.results.run_metadata`). Returns the rows.

    Raises:
        ValueError: as :func:`summarise`; an unknown metadata column in ``meta``.
    """
    bad = sorted(set(meta) - set(results.META_COLUMNS))
    if bad:
        raise ValueError(f"unknown metadata column(s) {bad}; columns are {list(results.META_COLUMNS)}")
    rows = []
    for r in summarise(path, factorizations).to_dict("records"):
        p = r.pop("path")
        params = dict(path=p, factorizations=factorizations, source=Path(path).name,
                      probe="bench/factor_probe.py", clock_control="none")
        row = results.run_metadata(body=body, nworld=nworld, seed=0, params=params, device="cuda:0")
        row.update(meta)
        row.update(r)
        results.append_row("ncu", row, root)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fightlab.kernels.ncu", description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --csv log of bench/factor_probe.py")
    ap.add_argument("nworld", type=int, help="the probe's world count")
    ap.add_argument("--root", default=".", help="folder holding data/ (default: .)")
    ap.add_argument("--factorizations", type=int, default=4,
                    help="factorizations per path in the log (probe: 1 warm-up + 3 = 4)")
    for col in ("gpu", "driver", "commit", "time", "torch"):
        ap.add_argument(f"--{col}", help=f"metadata '{col}' of the machine that ran the profile")
    a = ap.parse_args(argv)
    meta = {c: getattr(a, c) for c in ("gpu", "driver", "commit", "time", "torch") if getattr(a, c)}
    try:
        rows = publish(a.csv, a.nworld, a.root, a.factorizations, **meta)
    except (OSError, ValueError) as e:
        print(f"fightlab.kernels.ncu: error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        print(f"ncu {r['nworld']} {r['run_id']}: {r['launches']} launches, "
              f"{r['duration_us_per_factorization']:.1f} us per factorization, "
              f"occupancy {r['achieved_occupancy_pct']:.1f} %, "
              f"{r['warp_cycles_per_issued_instruction']:.2f} cycles per issued instruction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
