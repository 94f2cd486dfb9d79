"""fightlab.measure.ncu: Nsight Compute CSV logs of the factor probe -> ncu result rows (CPU)."""

from __future__ import annotations

import csv
import io
import json
import lzma
from pathlib import Path

import pandas as pd
import pytest

from fightlab import results
from fightlab.measure import ncu

REPO = Path(__file__).resolve().parents[1]
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
          "Metric Value", "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
          "Estimated Speedup"]
STOCK = "_qLD_acc__locals__kernel_e2be44fb_cuda_kernel_forward"
DIAG = "_qLDiag_div_1234abcd_cuda_kernel_forward"
GLOBAL = "_factor_tree_56fa32f3_cuda_kernel_forward"
SHARED = "_shared_kernel__locals___factor_tree_shared_1aceae4d_cuda_kernel_forward"


def fake_log(launches: dict[str, list[dict]], trailer: str = "") -> str:
    """An ncu --csv log: ncu's own message lines, then one row per (launch, metric). Each launch
    also gets a rule row (no metric) and, first, the Memory Workload section's byte/s
    "Memory Throughput" (the same metric name as the Speed Of Light %)."""
    out = io.StringIO()
    out.write("==PROF== Connected to process 1\n")
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(HEADER)
    i = 0
    for kernel, rows in launches.items():
        for r in rows:
            r = dict(r)
            grid, block = r.pop("grid", 1024), r.pop("block", 64)
            head = [i, 1, "python3", "h", kernel, 1, 7, f"({block}, 1, 1)", f"({grid}, 1, 1)", 0, "9.0"]
            w.writerow(head + ["Memory Workload Analysis", "Memory Throughput", "byte/s",
                               "66,302,749,254.72", "", "", "", "", ""])
            for name, (unit, value) in r.items():
                section = "Occupancy" if "Occupancy" in name else "GPU Speed Of Light Throughput"
                w.writerow(head + [section, name, unit, value, "", "", "", "", ""])
            w.writerow(head + ["S", "", "", "", "SOLBottleneck", "OPT", "too small", "", ""])
            i += 1
    return out.getvalue() + trailer


def launch(duration: float, occ: float, grid: int = 1024, block: int = 64, unit: str = "ns") -> dict:
    return {"Duration": (unit, f"{duration:,.0f}"), "Achieved Occupancy": ("%", occ),
            "Memory Throughput": ("%", 20.0), "Warp Cycles Per Issued Instruction": ("cycle", 11.0),
            "grid": grid, "block": block}


def test_summarise_per_path(tmp_path):
    log = tmp_path / "ncu.csv"
    # 2 factorizations × (2 levels + the diagonal division) on the stock path
    stock = [launch(10_000, 20.0, grid=40 + k, block=256) for k in range(4)]
    log.write_text(fake_log({STOCK: stock, DIAG: [launch(2_000, 30.0, grid=90)] * 2,
                             SHARED: [launch(90_000, 24.0), launch(100_000, 26.0)],
                             "some_other_kernel_0badf00d_cuda_kernel_forward": [launch(1, 1.0)],
                             # a name that only starts like ours is not ours
                             "_factor_tree_other_cuda_kernel_forward": [launch(1, 1.0)]}))
    s = ncu.summarise(log, factorizations=2, nworld=1024).set_index("path")
    assert list(s.index) == ["stock", "shared"]  # others dropped, KERNELS order
    st = s.loc["stock"]
    assert st["launches"] == 6 and st["kernels"] == "_qLD_acc__locals__kernel _qLDiag_div"
    assert st["grid_size"] == 90 and st["block_size"] == 256  # the largest launch
    assert st["duration_us_per_factorization"] == pytest.approx((4 * 10 + 2 * 2) / 2)
    sh = s.loc["shared"]
    assert sh["duration_us_per_factorization"] == pytest.approx(95.0)
    assert sh["duration_us"] == pytest.approx(95.0)  # median of 90 and 100 µs
    assert sh["achieved_occupancy_pct"] == pytest.approx(25.0)
    assert sh["memory_throughput_pct"] == pytest.approx(20.0)  # the %, not the byte/s row
    assert pd.isna(sh["l2_hit_rate_pct"])  # not in the log: not measured
    with pytest.raises(ValueError, match="6 launches of the stock path is not a multiple of factorizations=4"):
        ncu.summarise(log, factorizations=4)
    with pytest.raises(ValueError, match="factorizations must be an int >= 1, got 0"):
        ncu.summarise(log, factorizations=0)
    with pytest.raises(ValueError, match="shared path ran on 1024 blocks .*not nworld=8192"):
        ncu.summarise(log, factorizations=2, nworld=8192)
    with pytest.raises(ValueError, match="shared path launches once per factorization, but the log has 2 "
                                         "launches for factorizations=1"):
        ncu.summarise(log, factorizations=1)


def test_duration_units_and_compressed_logs(tmp_path):
    log = tmp_path / "ncu.csv.xz"
    text = fake_log({GLOBAL: [launch(150, 24.0, unit="usecond")]})
    log.write_bytes(lzma.compress(text.encode()))
    s = ncu.summarise(log, factorizations=1).set_index("path")
    assert s.loc["global", "duration_us"] == pytest.approx(150.0)  # usecond read as µs, not ns
    odd = tmp_path / "odd.csv"
    odd.write_text(fake_log({GLOBAL: [launch(1, 24.0, unit="fortnight")]}))
    with pytest.raises(ValueError, match=r"Duration in unit\(s\) \['fortnight'\].*add it to fightlab.measure.ncu"):
        ncu.read_csv(odd)


def test_bad_logs_are_clear_errors(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("==PROF== nothing profiled\n")
    with pytest.raises(ValueError, match="no Nsight Compute CSV header"):
        ncu.read_csv(empty)
    other = tmp_path / "other.csv"
    # a trailing ==ERROR== line must not become a row (or a NaN kernel name)
    other.write_text(fake_log({"gemm_kernel": [launch(1, 1.0)]}, trailer="==ERROR== the run failed\n"))
    with pytest.raises(ValueError, match=r"no launch of .*kernels seen: \['gemm_kernel'\]"):
        ncu.read_csv(other)
    renamed = tmp_path / "renamed.csv"
    renamed.write_text(fake_log({GLOBAL: [launch(1, 1.0)]}).replace('"Kernel Name"', '"Function"'))
    with pytest.raises(ValueError, match=r"missing column\(s\) \['Kernel Name'\]"):
        ncu.read_csv(renamed)
    assert ncu.main([str(empty), "1024", "--root", str(tmp_path)]) == 2
    assert ncu.main([str(tmp_path / "absent.csv"), "1024", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("fightlab.measure.ncu: error:") == 2 and "Traceback" not in err


def test_publish_rows_with_the_profiling_machine(tmp_path):
    log = tmp_path / "ncu_1024.csv"
    log.write_text(_three_paths())
    rows = ncu.publish(log, 1024, tmp_path, gpu="NVIDIA H200", driver="580.1", commit="abc1234")
    df = results.read_rows("ncu", tmp_path)
    assert len(rows) == 3 and len(df) == 3
    assert set(df["gpu"]) == {"NVIDIA H200"} and set(df["commit"]) == {"abc1234"}
    p = [json.loads(x) for x in df["params"]]
    assert [x["path"] for x in p] == ["stock", "global", "shared"] and set(df["nworld"]) == {1024}
    assert {x["source"] for x in p} == {"ncu_1024.csv"}
    assert [x["kernels"] for x in p] == ["_qLD_acc__locals__kernel _qLDiag_div", "_factor_tree",
                                         "_shared_kernel__locals___factor_tree_shared"]
    with pytest.raises(ValueError, match="already has rows of ncu_1024.csv at nworld=1024, commit abc1234"):
        ncu.publish(log, 1024, tmp_path, gpu="NVIDIA H200", commit="abc1234")
    assert len(results.read_rows("ncu", tmp_path)) == 3  # nothing appended twice
    ncu.publish(log, 1024, tmp_path, gpu="NVIDIA H200", commit="def5678")  # another commit: fine
    assert len(results.read_rows("ncu", tmp_path)) == 6
    with pytest.raises(ValueError, match=r"unknown metadata column\(s\) \['card'\]"):
        ncu.publish(log, 1024, tmp_path, card="H200")
    with pytest.raises(ValueError, match="no GPU name for the profile"):
        ncu.publish(log, 1024, tmp_path, gpu="cpu")
    with pytest.raises(ValueError, match="is not a folder"):
        ncu.publish(log, 1024, tmp_path / "typo", gpu="NVIDIA H200")


def test_committed_rows_match_the_committed_h200_logs():
    # data/results/ncu.csv was published from the H200's Nsight Compute logs, kept as
    # tests/data/ncu_*.csv.xz: every metric column must be what summarise gives for them
    committed = results.read_rows("ncu", REPO)
    committed = committed[[json.loads(p)["path"] in ncu.PATHS for p in committed["params"]]]
    assert sorted(committed["nworld"].unique()) == [1024, 8192]
    for nworld in (1024, 8192):
        s = ncu.summarise(REPO / f"tests/data/ncu_{nworld}.csv.xz", nworld=nworld)
        s = s.set_index("path")
        rows = committed[committed["nworld"] == nworld]
        params = [json.loads(p) for p in rows["params"]]
        assert sorted(p["path"] for p in params) == sorted(s.index) == ["global", "shared", "stock"]
        for p, (_, r) in zip(params, rows.iterrows()):
            assert p["kernels"] == s.loc[p["path"], "kernels"]
            for col in results.EXPERIMENTS["ncu"]:
                assert r[col] == pytest.approx(s.loc[p["path"], col], nan_ok=True), (nworld, p, col)


def test_committed_newton_rows_match_the_committed_h100_logs():
    """The single launch's ncu rows (bench/newton_ncu.sh on an H100, one per body) are what
    summarise gives for their sections logs, kept as tests/data/ncu_newton_<body>.csv.xz."""
    committed = results.read_rows("ncu", REPO)
    rows = committed[[json.loads(p)["path"] == "newton" for p in committed["params"]]]
    assert sorted(rows["body"]) == ["muscular-fast", "simple"] and set(rows["nworld"]) == {1024}
    for _, r in rows.iterrows():
        p = json.loads(r["params"])
        assert p["source"] == f"{r['body']}-sections.csv" and p["probe"] == "bench/newton_ncu.sh"
        s = ncu.summarise(REPO / f"tests/data/ncu_newton_{r['body']}.csv.xz", p["factorizations"],
                          nworld=1024, probe="newton").iloc[0]
        for col in results.EXPERIMENTS["ncu"]:
            assert r[col] == pytest.approx(s[col], nan_ok=True), (r["body"], col)


def _three_paths(nworld: int = 1024) -> str:
    """A full probe log: 4 factorizations per path (stock: 2 levels + the diagonal division)."""
    return fake_log({DIAG: [launch(2_000, 30.0, grid=nworld * 89 // 256 + 1)] * 4,
                     STOCK: [launch(10_000, 20.0, grid=40, block=256)] * 8,
                     GLOBAL: [launch(150_000, 24.0, grid=nworld)] * 4,
                     SHARED: [launch(90_000, 24.0, grid=nworld)] * 4})


def test_units_grid_and_incomplete_profiles(tmp_path):
    ns = tmp_path / "ns.csv"
    ns.write_text(_three_paths())
    a = ncu.summarise(ns, nworld=1024).set_index("path")
    # the diagonal division comes first in the log: its grid is still the stock path's largest
    assert a.loc["stock", "grid_size"] == 1024 * 89 // 256 + 1
    assert a.loc["stock", "duration_us_per_factorization"] == pytest.approx((8 * 10 + 4 * 2) / 4)
    m = tmp_path / "m.csv"  # the same durations printed in msecond
    m.write_text(fake_log({GLOBAL: [{**launch(0, 24.0), "Duration": ("msecond", "0.15")}] * 4}))
    assert ncu.summarise(m).set_index("path").loc["global", "duration_us"] == pytest.approx(150.0)
    only_two = tmp_path / "two.csv"
    only_two.write_text(fake_log({STOCK: [launch(1, 1.0)] * 4, GLOBAL: [launch(1, 1.0)] * 4}))
    with pytest.raises(ValueError, match=r"no launch of the shared path\(s\).*not published"):
        ncu.publish(only_two, 1024, tmp_path, gpu="NVIDIA H200")
    with pytest.raises(ValueError, match="global path ran on 1024 blocks .*not nworld=4096"):
        ncu.publish(ns, 4096, tmp_path, gpu="NVIDIA H200")
    assert not results.results_path("ncu", tmp_path).exists()  # nothing written by refusals


def test_missing_durations_repeated_launches_and_broken_xz(tmp_path, capsys):
    nodur = tmp_path / "nodur.csv"
    lacking = {k: v for k, v in launch(1, 1.0).items() if k != "Duration"}
    nodur.write_text(fake_log({GLOBAL: [launch(1000, 1.0)] * 3 + [lacking]}))
    with pytest.raises(ValueError, match="1 of the 4 launches of the global path have no readable Duration"):
        ncu.summarise(nodur)
    twice = tmp_path / "twice.csv"  # two logs pasted together: IDs restart at 0 in one process
    body = fake_log({GLOBAL: [launch(1000, 1.0)] * 2})
    twice.write_text(body + body.split("\n", 2)[2])
    with pytest.raises(ValueError, match=r"launch 1:0 \(process:ID\) reports .* twice"):
        ncu.read_csv(twice)
    broken = tmp_path / "broken.csv.xz"
    broken.write_bytes(lzma.compress(_three_paths().encode())[:200])
    with pytest.raises(ValueError, match="not a readable .xz file"):
        ncu.read_csv(broken)
    assert ncu.main([str(broken), "1024", "--root", str(tmp_path), "--gpu", "NVIDIA H200"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_publish_duplicates_and_gpu_names(tmp_path):
    log = tmp_path / "ncu_1024.csv"
    log.write_text(_three_paths())
    ncu.publish(log, 1024, tmp_path, gpu="NVIDIA H200", commit="abc1234")
    xz = tmp_path / "ncu_1024.csv.xz"  # the same log, compressed: still the same source
    xz.write_bytes(lzma.compress(log.read_bytes()))
    with pytest.raises(ValueError, match="already has rows of ncu_1024.csv at nworld=1024"):
        ncu.publish(xz, 1024, tmp_path, gpu="NVIDIA H200", commit="abc1234")
    other = tmp_path / "ncu_8192.csv"
    other.write_text(_three_paths(nworld=8192))
    ncu.publish(other, 8192, tmp_path, gpu="NVIDIA H200", commit="abc1234")  # another log: fine
    assert len(results.read_rows("ncu", tmp_path)) == 6
    for gpu in ("unknown", "", "cpu"):
        with pytest.raises(ValueError, match="no GPU name for the profile"):
            ncu.publish(log, 1024, tmp_path, gpu=gpu, commit="new0000")


def test_the_newton_probe_reads_its_one_path_from_a_real_log(tmp_path):
    """bench/newton_ncu.sh's sections log has the factor probe's form: the H200's real 1024-world
    log with the shared factor kernel renamed to the Newton kernel gives one "newton" row whose
    metrics are the shared path's; the factor paths are not the newton probe's, an unknown probe
    is refused, and rows record bench/newton_ncu.sh."""
    text = lzma.decompress((REPO / "tests/data/ncu_1024.csv.xz").read_bytes()).decode()
    newton = "_kernel__locals___newton_dc837693_cuda_kernel_forward"
    log = tmp_path / "muscular-fast-sections.csv"
    log.write_text("\n".join(ln.replace(ln.split('","')[4], newton) if "factor_tree_shared" in ln else ln
                             for ln in text.splitlines()))
    want = ncu.summarise(REPO / "tests/data/ncu_1024.csv.xz", nworld=1024).set_index("path").loc["shared"]
    got = ncu.summarise(log, nworld=1024, probe="newton")
    assert list(got["path"]) == ["newton"] and got.loc[0, "kernels"] == "_kernel__locals___newton"
    for col in results.EXPERIMENTS["ncu"]:
        assert got.loc[0, col] == pytest.approx(want[col], nan_ok=True), col
    with pytest.raises(ValueError, match="probe must be one of factor, newton, got 'tensor'"):
        ncu.summarise(log, probe="tensor")
    with pytest.raises(ValueError, match=r"no launch of \['_kernel__locals___newton'\]"):
        ncu.read_csv(REPO / "tests/data/ncu_1024.csv.xz", probe="newton")
    assert ncu.main([str(log), "1024", "--root", str(tmp_path), "--probe", "newton", "--body", "simple",
                     "--gpu", "NVIDIA H100 80GB HBM3", "--commit", "abc1234"]) == 0
    df = results.read_rows("ncu", tmp_path)
    p = json.loads(df.loc[0, "params"])
    assert len(df) == 1 and df.loc[0, "body"] == "simple" and p["path"] == "newton"
    assert p["probe"] == "bench/newton_ncu.sh" and p["source"] == "muscular-fast-sections.csv"
