"""bench/newton_ncu.sh: bad input refused in one line; with an ncu that answers, each body's
report, details and source page are written under OUT/ncu (a stand-in ncu: the CPU has none)."""

import os
import subprocess
import sys
from pathlib import Path

import json

import pytest

from fightlab import results

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "newton_ncu.sh"

FAKE_NCU = """#!/usr/bin/env bash
# records its arguments; "-o X" makes X.ncu-rep holding the profile's --launch-count and --nworld;
# "--import X --page details --csv" prints an ncu --csv log of the Newton kernel from them (that
# many launches on that many blocks), any other "--import" a text page; FAIL_BODY fails that body
echo "$@" >> "$LOG"
case " $* " in *" --body $FAIL_BODY "*) exit 3 ;; esac
n=1; w=1; imp=; csv=0; rep=
for ((i = 1; i <= $#; i++)); do
  j=$((i + 1))
  case "${!i}" in
    --launch-count) n=${!j} ;; --nworld) w=${!j} ;; --import) imp=${!j} ;; --csv) csv=1 ;;
    -o) rep=${!j}.ncu-rep ;;
  esac
done
[ -z "$rep" ] || echo "$n $w" > "$rep"
if [ -n "$imp" ]; then
  if [ "$csv" = 1 ] && [[ " $* " == *" --page details "* ]]; then
    read -r n w < "$imp"
    echo '"ID","Process ID","Kernel Name","Block Size","Grid Size","Section Name","Metric Name","Metric Unit","Metric Value"'
    for ((k = 0; k < n; k++)); do
      printf '"%s","1","_kernel__locals___newton_dc837693_cuda_kernel_forward","(64, 1, 1)","(%s, 1, 1)","GPU Speed Of Light Throughput","Duration","usecond","%s"\\n' "$k" "$w" "$((500 + k))"
    done
  else
    echo "Warp Cycles Per Issued Instruction 41.2"
  fi
fi
"""
FAKE_SMI = """#!/usr/bin/env bash
case "$*" in *driver_version*) echo 580.159.04 ;; *) echo "NVIDIA H100 80GB HBM3" ;; esac
"""


def _run(tmp_path, *args, **env):
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU)
    fake.chmod(0o755)
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "nvidia-smi").write_text(FAKE_SMI)
    (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    e = dict(os.environ, NCU=str(fake), OUT=str(tmp_path / "out"), LOG=str(tmp_path / "ncu.args"), FAIL_BODY="none",
             PATH=f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    e.update(env)
    e = {k: v for k, v in e.items() if v is not None}  # None: unset
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=e, cwd=tmp_path)


@pytest.mark.parametrize("args,env,words", [
    (("boxer",), {}, ["boxer", "simple, muscular-fast"]),
    (("simple", "0"), {}, ["NWORLD", "'0'"]),
    (("simple", "8"), {"LAUNCHES": "x"}, ["LAUNCHES", "'x'"]),
    (("simple", "8"), {"NCU": "/nonexistent/ncu"}, ["no ncu"]),
])
def test_bad_input_is_refused_in_one_line_and_nothing_is_made(tmp_path, args, env, words):
    r = _run(tmp_path, *args, **env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert not (tmp_path / "out").exists()


def test_each_body_gets_its_report_details_and_source_page(tmp_path):
    r = _run(tmp_path, "muscular-fast simple", "64", OUT=None, FIGHTLAB_RUNS=str(tmp_path / "runs"))  # no OUT: runs/
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "runs" / "ncu"
    for body in ("muscular-fast", "simple"):
        assert (out / f"{body}.ncu-rep").is_file()
        assert "Warp Cycles" in (out / f"{body}-details.txt").read_text()
        assert (out / f"{body}-source.csv").is_file() and (out / f"{body}-sections.csv").is_file()
    rows = results.read_rows("ncu", tmp_path / "runs")
    assert list(rows["body"]) == ["muscular-fast", "simple"] and set(rows["nworld"]) == {64}
    assert set(rows["gpu"]) == {"NVIDIA H100 80GB HBM3"} and set(rows["driver"].astype(str)) == {"580.159.04"}
    assert list(rows["duration_us_per_factorization"]) == [500.5, 500.5]  # (500 + 501) µs over 2 launches
    assert {json.loads(p)["path"] for p in rows["params"]} == {"newton"}
    calls = (tmp_path / "ncu.args").read_text().splitlines()
    profiled = [c for c in calls if " -o " in f" {c} "]  # one profile per body; the pages come from its report
    assert len(profiled) == 2 and all("--solver-loop single_launch" in c and "--nworld 64" in c for c in profiled)
    assert sum("--import" in c for c in calls) == 6
    assert not list(out.glob("*.tmp*"))


def test_with_out_the_folder_comes_back_as_one_tarball(tmp_path):
    import tarfile

    r = _run(tmp_path, "muscular-fast simple", "64")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["data", "ncu.tgz"]  # 8 files come back
    assert len(results.read_rows("ncu", tmp_path / "out")) == 2  # data/results/ncu.csv: 2 folders down
    with tarfile.open(tmp_path / "out" / "ncu.tgz") as t:
        names = set(t.getnames())
    assert {f"ncu/{b}{s}" for b in ("simple", "muscular-fast")
            for s in (".ncu-rep", "-details.txt", "-source.csv", "-sections.csv", ".log")} <= names


def test_an_existing_ncu_folder_in_out_is_left_alone(tmp_path):
    (tmp_path / "out" / "ncu").mkdir(parents=True)
    (tmp_path / "out" / "ncu" / "mine.txt").write_text("keep")
    r = _run(tmp_path, "simple", "64")
    assert r.returncode == 2 and "exists already" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "out" / "ncu" / "mine.txt").read_text() == "keep"
    assert not (tmp_path / "ncu.args").exists()


def test_a_failed_body_is_named_the_others_still_run_and_the_exit_code_says_so(tmp_path):
    r = _run(tmp_path, "muscular-fast simple", "64", FAIL_BODY="muscular-fast", OUT=None,
             FIGHTLAB_RUNS=str(tmp_path / "runs"))
    assert r.returncode == 1
    assert "muscular-fast: ncu failed" in r.stdout
    out = tmp_path / "runs" / "ncu"
    assert (out / "simple.ncu-rep").is_file() and not (out / "muscular-fast.ncu-rep").exists()
