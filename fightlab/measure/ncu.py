"""Nsight Compute profiles of the mass-matrix factor kernels (and of the single-launch Newton
solve: ``--probe newton``, bench/newton_ncu.sh's sections log) as result rows: where the time goes.

``bench/gpu_batch.sh`` with ``NCU=NWORLD`` runs ``bench/factor_probe.py`` under ``ncu --csv``
(sections SpeedOfLight, Occupancy, WarpStateStats, MemoryWorkloadAnalysis) and then publishes it:

    python -m fightlab.measure.ncu RAW.csv NWORLD [--root .] [--factorizations 4]

One ``ncu`` row per factor path (``params.path``: ``stock`` = MuJoCo Warp's per-level
``_qLD_acc`` launches and its final ``_qLDiag_div``; ``global`` / ``shared`` = fightlab's single
launch), medians over that path's launches; ``params.kernels`` lists the kernels the log held
for the path (the 2026-11-30 logs profiled ``_qLD_acc`` only: their stock row leaves out
``_qLDiag_div``, one short launch per factorization). ``duration_us_per_factorization`` sums the
path's kernel durations over its launches and divides by the factorizations profiled (the
probe: one warm-up + 3 timed calls per path = 4; each single-launch path must show exactly that
many launches, on ``nworld`` blocks). Durations are ncu's (each launch replayed alone with caches flushed and clocks unlocked:
``--clock-control none``), so they are not the benchmark's times; the occupancy, issue and
hit-rate metrics are what this table is for. Metric names are NVIDIA's, from the CSV.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from pathlib import Path

import pandas as pd

from fightlab import results

#: kernel-name prefix (as Warp names them in the CUDA module) -> factor path; names are matched
#: from their start up to Warp's "_<8 hex>_cuda_kernel_forward" suffix
KERNELS = {"_qLD_acc__locals__kernel": "stock", "_qLDiag_div": "stock",
           "_factor_tree": "global", "_shared_kernel__locals___factor_tree_shared": "shared"}
#: the factor paths, in table order (the probe runs all three)
PATHS = tuple(dict.fromkeys(KERNELS.values()))
#: what each probe profiles: its kernel prefixes -> paths, the paths a complete log holds, the
#: script that runs it. "newton": bench/newton_ncu.sh's sections pass over the single-launch
#: Newton solve (one launch per solve of all worlds: its "factorizations" are solves)
PROBES = {"factor": (KERNELS, PATHS, "bench/factor_probe.py"),
          "newton": ({"_kernel__locals___newton": "newton"}, ("newton",), "bench/newton_ncu.sh")}


def _kernel_re(kernels: dict[str, str]) -> re.Pattern:
    return re.compile("^(" + "|".join(map(re.escape, kernels)) + ")_[0-9a-f]{8}_cuda_kernel")


def _probe(probe: str) -> tuple[dict[str, str], tuple[str, ...], str]:
    if probe not in PROBES:
        raise ValueError(f"probe must be one of {', '.join(PROBES)}, got {probe!r}")
    return PROBES[probe]

#: Nsight Compute's time units -> ns (ncu picks the unit per value unless told otherwise)
TIME_UNITS_NS = {"ns": 1.0, "nsecond": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
                 "second": 1e9, "s": 1e9}

#: the columns an ncu --csv log must have
REQUIRED = ("ID", "Process ID", "Kernel Name", "Block Size", "Grid Size", "Section Name", "Metric Name",
            "Metric Unit", "Metric Value")

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


def _read_text(path: Path | str) -> str:
    path = Path(path)
    if path.suffix == ".xz":
        import lzma

        try:
            with lzma.open(path, "rt") as f:
                return f.read()
        except (EOFError, lzma.LZMAError) as e:
            raise ValueError(f"{path}: not a readable .xz file ({e})") from None
    return path.read_text()


def read_csv(path: Path | str, probe: str = "factor") -> pd.DataFrame:
    """Nsight Compute's ``--csv`` log (plain or ``.xz``; the lines before the header are ncu's own
    messages) as a long table: one row per (launch ``ID``, metric), with ``path``
    (``probe``'s kernels, :data:`PROBES`; launches of other kernels dropped), ``kernel`` (the matched prefix) and
    ``value`` (float; thousands separators removed; ``Duration`` converted to ns whatever unit
    ncu printed). "Memory Throughput" is kept only from the Speed Of Light section (a %; the
    Memory Workload section reports the same name in byte/s).

    Raises:
        OSError: the file cannot be read.
        ValueError: an unknown ``probe``, not readable as .xz, no ncu header line, missing
            columns, no launch of the probe's kernels (names the kernels seen), a Duration unit not in
            :data:`TIME_UNITS_NS`, or a launch (process, ID) reporting a metric twice.
    """
    kernels = _probe(probe)[0]
    lines = _read_text(path).splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError(f"{path}: no Nsight Compute CSV header (a line starting with \"ID\")")
    # ncu may append its own ==PROF== / ==ERROR== lines after the table
    body = [ln for ln in lines[start:] if not ln.startswith("==")]
    df = pd.read_csv(io.StringIO("\n".join(body)))
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not an ncu --csv log of the expected form: missing column(s) "
                         f"{missing}; expected {list(REQUIRED)}")
    names = df["Kernel Name"].astype(str)
    prefix = names.str.extract(_kernel_re(kernels))[0]
    if prefix.isna().all():
        seen = sorted({n[:48] for n in names.dropna()})
        raise ValueError(f"{path}: no launch of {sorted(kernels)}; kernels seen: {seen}")
    df = df.assign(kernel=prefix, path=prefix.map(kernels)).dropna(subset=["path", "Metric Name"])
    df = df[~((df["Metric Name"] == "Memory Throughput")
              & (df["Section Name"] != "GPU Speed Of Light Throughput"))]
    df["value"] = pd.to_numeric(df["Metric Value"].astype(str).str.replace(",", ""), errors="coerce")
    dur = df["Metric Name"] == "Duration"
    units = set(df.loc[dur, "Metric Unit"].astype(str))
    bad = sorted(units - set(TIME_UNITS_NS))
    if bad:
        raise ValueError(f"{path}: Duration in unit(s) {bad}; known units {sorted(TIME_UNITS_NS)} "
                         "(add it to fightlab.measure.ncu.TIME_UNITS_NS)")
    df.loc[dur, "value"] = df.loc[dur, "value"] * df.loc[dur, "Metric Unit"].astype(str).map(TIME_UNITS_NS)
    # one launch = one (process, ID); a repeated (process, ID, metric) means concatenated logs
    df["launch"] = df["Process ID"].astype(str) + ":" + df["ID"].astype(str)
    rep = df.duplicated(["launch", "Section Name", "Metric Name"])
    if rep.any():
        raise ValueError(f"{path}: launch {df.loc[rep, 'launch'].iloc[0]} (process:ID) reports "
                         f"{df.loc[rep, 'Metric Name'].iloc[0]!r} twice: several logs in one file?")
    return df


def _dims(g: pd.DataFrame, col: str) -> pd.Series:
    """First component of "(x, y, z)" per launch of ``g``."""
    return g.drop_duplicates("launch")[col].map(lambda v: int(str(v).strip("()").split(",")[0]))


def summarise(path: Path | str, factorizations: int = 4, nworld: int | None = None,
              probe: str = "factor") -> pd.DataFrame:
    """One row per path of ``probe`` (:data:`PROBES`; the factor paths by default): launches, the largest block size (threads) and the largest grid
    size (blocks) among its launches (the stock path's grid changes with the tree level),
    ``kernels`` (the kernel prefixes seen, space separated), the medians of :data:`METRICS` over
    the path's launches (``duration_us`` in µs) and ``duration_us_per_factorization`` (sum of
    durations / ``factorizations``).

    Args:
        path: the ncu --csv log (plain or .xz).
        factorizations: factorizations per path in the log (int >= 1).
        nworld: when given, the single-launch paths must have run on ``nworld`` blocks (one per
            world): a log of another world count is refused.
        probe: "factor" (bench/factor_probe.py's log) or "newton" (bench/newton_ncu.sh's).

    Raises:
        OSError / ValueError: as :func:`read_csv`; ValueError also when ``factorizations`` < 1,
            a path's launch count is not a multiple of it, a launch has no readable Duration, or
            a single-launch path's launches are not exactly ``factorizations`` or its grid is not
            ``nworld``.
    """
    if not isinstance(factorizations, int) or isinstance(factorizations, bool) or factorizations < 1:
        raise ValueError(f"factorizations must be an int >= 1, got {factorizations!r}")
    paths = _probe(probe)[1]
    df = read_csv(path, probe)
    out = []
    for p, g in df.groupby("path", sort=False):
        wide = g.pivot_table(index="launch", columns="Metric Name", values="value",
                             aggfunc="first", dropna=False).reindex(g["launch"].unique())
        launches = len(wide)
        if launches % factorizations:
            raise ValueError(f"{path}: {launches} launches of the {p} path is not a multiple of "
                             f"factorizations={factorizations}")
        grid = int(_dims(g, "Grid Size").max())
        if p != "stock" and launches != factorizations:
            raise ValueError(f"{path}: the {p} path launches once per factorization, but the log "
                             f"has {launches} launches for factorizations={factorizations}")
        if p != "stock" and nworld is not None and grid != nworld:
            raise ValueError(f"{path}: the {p} path ran on {grid} blocks (one per world), not "
                             f"nworld={nworld}: is this the log of another world count?")
        row = dict(path=p, kernels=" ".join(sorted(set(g["kernel"]))), launches=launches,
                   block_size=int(_dims(g, "Block Size").max()), grid_size=grid)
        dur_ns = wide.get("Duration")
        if dur_ns is not None and dur_ns.isna().any():
            raise ValueError(f"{path}: {int(dur_ns.isna().sum())} of the {launches} launches of the "
                             f"{p} path have no readable Duration")
        row["duration_us_per_factorization"] = (float(dur_ns.sum()) * 1e-3 / factorizations
                                                if dur_ns is not None else float("nan"))
        for col, name in METRICS.items():
            v = float(wide[name].median()) if name in wide else float("nan")
            row[col] = v * 1e-3 if col == "duration_us" else v
        out.append(row)
    order = {p: i for i, p in enumerate(paths)}
    return pd.DataFrame(out).sort_values("path", key=lambda s: s.map(order)).reset_index(drop=True)


def publish(path: Path | str, nworld: int, root: Path | str = ".", factorizations: int = 4,
            body: str = "muscular-fast", probe: str = "factor", **meta: str) -> list[dict]:
    """Append one ``ncu`` row per factor path of ``path`` to ``root/data/results/ncu.csv``.

    ``meta`` overrides metadata columns (``gpu``, ``driver``, ``commit``, ``time``, ``torch``, …)
    for a profile published away from the machine that ran it; by default they describe this
    machine (:func:`fightlab.results.run_metadata`). ``params`` records the path, the kernels
    seen, the factorizations, the log's file name (``source``) and the probe's script (``probe``:
    :data:`PROBES`). Returns the rows.

    Raises:
        OSError / ValueError: as :func:`summarise` (with ``nworld`` checked against the log);
            ValueError also for a log without all the probe's paths, an unknown metadata column in
            ``meta``, ``root`` not an existing folder; no GPU name (this machine has no CUDA
            device and ``gpu`` was not given); rows of the same log, world count and commit
            already published (nothing is appended twice).
    """
    bad = sorted(set(meta) - set(results.META_COLUMNS))
    if bad:
        raise ValueError(f"unknown metadata column(s) {bad}; columns are {list(results.META_COLUMNS)}")
    if not Path(root).is_dir():
        raise ValueError(f"root {str(root)!r} is not a folder (it should hold data/results/)")
    _, paths, script = _probe(probe)
    summary = summarise(path, factorizations, nworld=nworld, probe=probe)
    absent = [p for p in paths if p not in set(summary["path"])]
    if absent:
        raise ValueError(f"{path}: no launch of the {', '.join(absent)} path(s); the probe runs all "
                         f"of {list(paths)}: an incomplete profile is not published")
    source = Path(path).name.removesuffix(".xz")  # a log and its .xz are the same source
    rows = []
    for r in summary.to_dict("records"):
        p, kernels = r.pop("path"), r.pop("kernels")
        params = dict(path=p, kernels=kernels, factorizations=factorizations, source=source,
                      probe=script, clock_control="none")
        row = results.run_metadata(body=body, nworld=nworld, seed=0, params=params, device="cuda:0")
        row.update(meta, **r)
        if row["gpu"] in ("", "cpu", "unknown"):
            raise ValueError(f"no GPU name for the profile (this machine reports {row['gpu']!r}): "
                             "pass gpu= (--gpu) naming the card that ran it")
        rows.append(row)
    with results.publish_lock(root):  # the duplicate check and the appends as one step
        old = results.read_rows("ncu", root)  # empty without a file
        if any(json.loads(p).get("source") == source and int(n) == int(nworld) and c == rows[0]["commit"]
               for p, n, c in zip(old["params"], old["nworld"], old["commit"])):
            raise ValueError(f"{results.results_path('ncu', root)} already has rows of {source} at "
                             f"nworld={nworld}, commit {rows[0]['commit']}: not appended again")
        for row in rows:
            results.append_row("ncu", row, root)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fightlab.measure.ncu", description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --csv log of bench/factor_probe.py (or of bench/newton_ncu.sh: --probe newton)")
    ap.add_argument("nworld", type=int, help="the probe's world count")
    ap.add_argument("--root", default=".", help="folder holding data/ (default: .)")
    ap.add_argument("--factorizations", type=int, default=4,
                    help="factorizations per path in the log (probe: 1 warm-up + 3 = 4)")
    ap.add_argument("--probe", choices=list(PROBES), default="factor", help="which probe's log (default: factor)")
    ap.add_argument("--body", choices=("muscular-fast", "simple"), default="muscular-fast",
                    help="the body profiled (default: muscular-fast)")
    cols = ("gpu", "driver", "commit", "time", "torch")
    for col in cols:
        ap.add_argument(f"--{col}", help=f"metadata '{col}' of the machine that ran the profile")
    a = ap.parse_args(argv)
    meta = {c: getattr(a, c) for c in cols if getattr(a, c)}
    try:
        rows = publish(a.csv, a.nworld, a.root, a.factorizations, body=a.body, probe=a.probe, **meta)
    except (OSError, ValueError) as e:  # read_csv turns .xz decoding errors into ValueError
        print(f"fightlab.measure.ncu: error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        print(f"ncu {r['nworld']} {r['run_id']}: {r['launches']} launches, "
              f"{r['duration_us_per_factorization']:.1f} us per factorization, "
              f"occupancy {r['achieved_occupancy_pct']:.1f} %, "
              f"{r['warp_cycles_per_issued_instruction']:.2f} cycles per issued instruction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
