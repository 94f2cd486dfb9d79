"""fightlab.kernels.ncu: Nsight Compute CSV logs of the factor probe -> ncu result rows (CPU)."""

from __future__ import annotations

import csv
import io
import json
import lzma
from pathlib import Path

import pandas as pd
import pytest

from fightlab import results
from fightlab.kernels import ncu

REPO = Path(__file__).resolve().parents[1]
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
          "Metric Value", "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
          "Estimated Speedup"]


def fake_log(launches: dict[str, list[dict]]) -> str:
    """An ncu --csv log: ncu's own message lines, then one row per (launch, metric)."""
    out = io.StringIO()
    out.write("==PROF== Connected to process 1\n")
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(HEADER)
    i = 0
    for kernel, rows in launches.items():
        for r in rows:
            grid = r.pop("grid", 1024)
            for name, (unit, value) in r.items():
                w.writerow([i, 1, "python3", "h", kernel, 1, 7, "(64, 1, 1)", f"({grid}, 1, 1)", 0,
                            "9.0", "S", name, unit, value, "", "", "", "", ""])
            # a rule row (no metric) and the Memory Workload section's byte/s "Memory Throughput"
            w.writerow([i, 1, "python3", "h", kernel, 1, 7, "(64, 1, 1)", f"({grid}, 1, 1)", 0,
                        "9.0", "S", "", "", "", "SOLBottleneck", "OPT", "too small", "", ""])
            w.writerow([i, 1, "python3", "h", kernel, 1, 7, "(64, 1, 1)", f"({grid}, 1, 1)", 0,
                        "9.0", "Memory Workload Analysis", "Memory Throughput", "byte/s",
                        "66,302,749,254.72", "", "", "", "", ""])
            i += 1
    return out.getvalue()


def launch(duration_ns: float, occ: float, grid: int = 1024) -> dict:
    return {"Duration": ("ns", f"{duration_ns:,.0f}"), "Achieved Occupancy": ("%", occ),
            "Memory Throughput": ("%", 20.0), "Warp Cycles Per Issued Instruction": ("cycle", 11.0),
            "grid": grid}


def test_summarise_per_path(tmp_path):
    log = tmp_path / "ncu.csv"
    stock = [launch(10_000, 20.0, grid=40 + k) for k in range(4)]  # 2 factorizations × 2 levels
    log.write_text(fake_log({"_qLD_acc__locals__kernel_e2_cuda_kernel_forward": stock,
                             "_shared_kernel__locals___factor_tree_shared_1a_cuda_kernel_forward":
                                 [launch(90_000, 24.0), launch(100_000, 26.0)],
                             "some_other_kernel": [launch(1, 1.0)]}))
    s = ncu.summarise(log, factorizations=2).set_index("path")
    assert list(s.index) == ["stock", "shared"]  # other kernels dropped, KERNELS order
    assert s.loc["stock", "launches"] == 4 and s.loc["stock", "grid_size"] == 43  # largest launch
    assert s.loc["stock", "duration_us_per_factorization"] == pytest.approx(20.0)  # 4 × 10 µs / 2
    assert s.loc["shared", "duration_us_per_factorization"] == pytest.approx(95.0)
    assert s.loc["shared", "duration_us"] == pytest.approx(95.0)  # median of 90 and 100
    assert s.loc["shared", "achieved_occupancy_pct"] == pytest.approx(25.0)
    assert s.loc["shared", "memory_throughput_pct"] == pytest.approx(20.0)  # the %, not byte/s
    assert pd.isna(s.loc["shared", "l2_hit_rate_pct"])  # not in the log: not measured
    with pytest.raises(ValueError, match="4 launches of the stock path is not a multiple of factorizations=3"):
        ncu.summarise(log, factorizations=3)
    with pytest.raises(ValueError, match="factorizations must be an int >= 1, got 0"):
        ncu.summarise(log, factorizations=0)


def test_bad_logs_are_clear_errors(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("==PROF== nothing profiled\n")
    with pytest.raises(ValueError, match="no Nsight Compute CSV header"):
        ncu.read_csv(empty)
    other = tmp_path / "other.csv"
    other.write_text(fake_log({"gemm_kernel": [launch(1, 1.0)]}))
    with pytest.raises(ValueError, match=r"no launch of .*kernels seen: \['gemm_kernel'\]"):
        ncu.read_csv(other)
    assert ncu.main([str(empty), "1024", "--root", str(tmp_path)]) == 2


def test_publish_rows_with_the_profiling_machine(tmp_path):
    log = tmp_path / "ncu.csv"
    log.write_text(fake_log({"_factor_tree_56_cuda_kernel_forward": [launch(1000, 1.0)] * 4}))
    rows = ncu.publish(log, 1024, tmp_path, gpu="NVIDIA H200", driver="580.1", commit="abc1234")
    df = results.read_rows("ncu", tmp_path)
    assert len(rows) == 1 and len(df) == 1
    assert df["gpu"].iloc[0] == "NVIDIA H200" and df["commit"].iloc[0] == "abc1234"
    assert df["nworld"].iloc[0] == 1024 and '"path": "global"' in df["params"].iloc[0]
    with pytest.raises(ValueError, match=r"unknown metadata column\(s\) \['card'\]"):
        ncu.publish(log, 1024, tmp_path, card="H200")


def test_committed_rows_match_the_committed_h200_logs(tmp_path):
    # data/results/ncu.csv was published from bench/logs/2026-11-30-s3/ncu_*.csv.xz
    committed = results.read_rows("ncu", REPO)
    for nworld in (1024, 8192):
        raw = tmp_path / f"ncu_{nworld}.csv"
        raw.write_bytes(lzma.decompress((REPO / f"bench/logs/2026-11-30-s3/ncu_{nworld}.csv.xz").read_bytes()))
        s = ncu.summarise(raw).set_index("path")
        rows = committed[committed["nworld"] == nworld]
        paths = [json.loads(p)["path"] for p in rows["params"]]
        assert sorted(paths) == sorted(s.index) == ["global", "shared", "stock"]
        for p, (_, r) in zip(paths, rows.iterrows()):
            for col in ("duration_us_per_factorization", "achieved_occupancy_pct",
                        "warp_cycles_per_issued_instruction", "l1_hit_rate_pct"):
                assert r[col] == pytest.approx(s.loc[p, col]), (nworld, p, col)
