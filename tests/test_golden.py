"""A fixed-seed tiny training on warp's CPU device writes the same rows.csv, bit for bit.

The fixtures in tests/data/golden_*.csv hold every rows.csv column that does not depend on the
wall clock, as this code wrote them; a run compares only those columns (columns added later, such
as per-term reward sums, pass). Python writes a float as its shortest repr, so equal text is equal
bits. Regenerate after a deliberate change of behaviour only: `python tests/test_golden.py`.

The training runs in a child process that pins the CPU-dependent code paths (`PORTABLE_ENV`,
`_portable_warp`; torch, MKL, oneDNN and warp all pick code paths by the CPU's features by
default). Checked on one Sapphire Rapids host: the fixtures hold with glibc's libm without its
FMA/AVX2 variants (GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F) and with MKL limited to
SSE4.2 or AVX2 (MKL_ENABLE_INSTRUCTIONS). What they do depend on is the numeric stack in
tests/data/golden_build.txt: MKL's vector math (torch.exp, log, sqrt) and sgemm give other bits
on another code branch (MKL_CBWR=AVX2 or AVX512 change them), and the fixtures of 2026-12-02
(torch from PyPI then, before setup.sh took the +cpu build) part from a 2.13.0+cpu run in the
first PPO update's approx_kl. A mismatch's message names both stacks.

The CPU's vendor matters too: on an AMD EPYC host the same stack and settings part from the
Intel recording in the first update's statistics (MKL takes other code paths there). So the
fixtures are per vendor: golden_{name}.csv and golden_build.txt for GenuineIntel (the first
recording), golden_{name}.{vendor}.csv and golden_build.{vendor}.txt for another; a vendor with
none skips, naming how to record them.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
#: the vendor of the first recording, whose fixtures carry no vendor in their names
FIRST_VENDOR = "GenuineIntel"

#: rows.csv columns that the wall clock sets (left out of the fixtures)
TIMING = ("wall_s", "elapsed_s", "env_steps_per_s", "physics_steps_per_s", "rollout_s", "update_s")

#: name: (body, fresh iterations, iterations after a resume from the fresh run's last checkpoint)
CASES = {"simple": ("simple", 3, 5), "muscular-fast": ("muscular-fast", 3, None)}


#: torch's ATen kernels without SIMD dispatch; MKL's conditional numerical reproducibility
#: (Intel's "MKL_CBWR", the same results on any x86 CPU); oneDNN at SSE4.1; one thread each
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41",
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _portable_warp() -> None:
    """warp's CPU kernels for the baseline x86-64 target: its default flags less ``-march=native``
    (the host's features: FMA contraction where the CPU has it)."""
    import warp as wp

    wp.config.cpu_compiler_flags = " ".join(f for f in wp.config.cpu_compiler_flags.split()
                                            if f != "-march=native")


def _train(name: str, run_dir: Path) -> Path:
    """Train the case into run_dir (fresh, then the resume if it has one) in a child process
    with portable floats; its rows.csv."""
    env = {**os.environ, **PORTABLE_ENV}
    subprocess.run([sys.executable, __file__, "--train", name, str(run_dir)], env=env, check=True,
                   cwd=Path(__file__).resolve().parent.parent)
    return run_dir / "rows.csv"


def _train_here(name: str, run_dir: Path) -> Path:
    """The child's work: the case's trainings in this process."""
    import torch

    _portable_warp()
    torch.set_num_threads(1)
    from fightlab.config import TrainConfig
    from fightlab.run.runner import train

    from fightlab.config import REFERENCE_SOLVER, EnvConfig, PPOConfig

    body, n, resumed = CASES[name]
    cfg = TrainConfig(body=body, nworld=4, device="cpu", seed=0, max_iterations=n, run_dir=str(run_dir),
                      env=EnvConfig(**REFERENCE_SOLVER),  # the solver of the recording
                      ppo=PPOConfig())  # and its learner: PPOConfig's own defaults, before config.BODY_PPO
    train(cfg, progress=False)
    if resumed is not None:
        train(dataclasses.replace(cfg, max_iterations=resumed, resume=str(run_dir / "latest.pt")),
              progress=False)
    return run_dir / "rows.csv"


def _build() -> str:
    """The numeric stack a recording depends on beyond the CPU: torch's build (a +cpu wheel or
    PyPI's CUDA one), the MKL it links, glibc; written beside the fixtures, shown when they differ."""
    import platform

    import torch

    mkl = next((ln.strip(" -") for ln in torch.__config__.show().splitlines() if "Math Kernel Library" in ln), "no MKL")
    return f"torch {torch.__version__}; {mkl}; {'-'.join(platform.libc_ver())}"


def _vendor() -> str:
    """The CPU's vendor_id from /proc/cpuinfo ("GenuineIntel", "AuthenticAMD"), else "unknown"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return "unknown"


def _fixture(stem: str, suffix: str, vendor: str) -> Path:
    """This vendor's fixture file: ``{stem}{suffix}`` for FIRST_VENDOR, else ``{stem}.{vendor}{suffix}``."""
    return DATA / (f"{stem}{suffix}" if vendor == FIRST_VENDOR else f"{stem}.{vendor}{suffix}")


def _columns(path: Path, columns: list[str] | None = None) -> str:
    """The CSV text of rows.csv's `columns` (default: all but TIMING), in that order."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    have = list(rows[0]) if rows else []
    columns = columns or [c for c in have if c not in TIMING]
    missing = [c for c in columns if c not in have]
    if missing:
        raise AssertionError(f"{path} lacks the fixture's columns {missing}")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    w.writerows([r[c] for c in columns] for r in rows)
    return out.getvalue()


@pytest.mark.parametrize("name", list(CASES))
def test_training_rows_are_bitwise_unchanged(name, tmp_path):
    vendor = _vendor()
    fixture = _fixture(f"golden_{name}", ".csv", vendor)
    if not fixture.exists():
        pytest.skip(f"no golden rows for {vendor} CPUs (recorded for {FIRST_VENDOR} and the "
                    f"*.<vendor>.csv in tests/data); `python tests/test_golden.py` records them on this CPU")
    want = fixture.read_text()
    columns = want.splitlines()[0].split(",")
    got = _columns(_train(name, tmp_path / "run"), columns)
    recorded = _fixture("golden_build", ".txt", vendor).read_text().strip()
    assert got == want, (f"rows.csv differs from {fixture.name} (recorded with {recorded}; "
                         f"this is {_build()}):\n{got}")


if __name__ == "__main__" and sys.argv[1:2] == ["--train"]:  # the child of _train
    # this checkout's fightlab, not the one an editable install points at (as a script the
    # child's sys.path starts with tests/, so `import fightlab` would find the install's copy)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    _train_here(sys.argv[2], Path(sys.argv[3]))
elif __name__ == "__main__":  # rewrite this CPU vendor's fixtures from this code
    import tempfile

    vendor = _vendor()
    for name in CASES:
        with tempfile.TemporaryDirectory() as d:
            text = _columns(_train(name, Path(d) / "run"))
        _fixture(f"golden_{name}", ".csv", vendor).write_text(text)
        print(f"wrote {_fixture(f'golden_{name}', '.csv', vendor)}", file=sys.stderr)
    _fixture("golden_build", ".txt", vendor).write_text(_build() + "\n")
