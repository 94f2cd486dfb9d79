"""The rented host's check, run first in the survey task's ``setup`` (fightlab/survey/bench.sky.yaml),
before anything is installed: fail fast on a host that cannot run fightlab or would take long to
install it, so the launcher tears it down and tries the next (the study: one RTX 5080's driver
was too old for the GPU code; slow hosts spent 17 + 26 minutes uploading and installing).

    python3 fightlab/survey/hostcheck.py      # stdlib only: fightlab is not installed yet

Checks, each from an environment variable the task sets (unset or empty: not checked):
``FIGHTLAB_GPU`` (the GPU type asked for is the one ``nvidia-smi`` names, ``hosts.same_gpu``);
``FIGHTLAB_MIN_CUDA`` (the driver's "CUDA Version" is at least this: the launcher passes the
oldest that runs its warp, ``fightlab.measure.bench.min_driver_cuda``, the rule bench applies
again after the install); ``FIGHTLAB_MIN_DRIVER``; ``FIGHTLAB_MIN_MBIT_S`` with
``FIGHTLAB_BANDWIDTH_URL`` (download bandwidth [Mbit/s] of up to `BANDWIDTH_BYTES` from the URL).

Prints one ``fightlab host check: …`` line per check; on the first failure one line
``fightlab host check FAILED: <why>`` (`FAILED_MARK`, which the launcher looks for) and exit
status `EXIT_FAILED` (3). Stdlib only (and ``fightlab/hosts.py``, found two folders up), Python >= 3.7:
it runs on the host's python3.
"""

import os
import re
import subprocess
import sys

try:
    from fightlab.hosts import download_mb_per_s, same_gpu
except ImportError:  # run as a script from the workdir, fightlab not installed: its source is here
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from fightlab.hosts import download_mb_per_s, same_gpu

#: the line prefix of a failed check (the launcher reads the task's output for it)
FAILED_MARK = "fightlab host check FAILED:"
#: exit status of a failed check
EXIT_FAILED = 3
#: bytes read at most from the bandwidth URL, and the timeout [s]
BANDWIDTH_BYTES, BANDWIDTH_TIMEOUT_S = 32 * 2**20, 20.0

__all__ = ["FAILED_MARK", "EXIT_FAILED", "BANDWIDTH_BYTES", "BANDWIDTH_TIMEOUT_S", "version_tuple",
           "parse_cuda_version", "parse_gpus", "cuda_check", "driver_check",
           "measure_mbit_s", "run_checks", "main"]


def version_tuple(text):
    """``"580.65.06"`` -> ``(580, 65, 6)``; ``"13.4"`` -> ``(13, 4)``; None when not a version."""
    m = re.match(r"^\s*(\d+(?:\.\d+)*)\s*$", str(text))
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def parse_cuda_version(smi_text):
    """The driver's CUDA version from plain ``nvidia-smi`` output ("CUDA Version: 13.0" in its
    header) as a string ``"13.0"``; None when absent."""
    m = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", smi_text)
    return m.group(1) if m else None


def parse_gpus(query_text):
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`` output -> a list of
    (name, driver version) per GPU."""
    rows = [[p.strip() for p in line.split(",")] for line in query_text.strip().splitlines()]
    return [(p[0], p[-1]) for p in rows if len(p) >= 2 and p[0]]


def _older(have, need, parts=None):
    """Whether version ``have`` is older than ``need`` (their first ``parts`` numbers); False when
    either is not a version."""
    h, w = version_tuple(have), version_tuple(need)
    return h is not None and w is not None and h[:parts] < w[:parts]


def cuda_check(driver_cuda, need):
    """Why the driver's CUDA version ``driver_cuda`` ("12.8") is older than ``need`` ("13.0",
    the oldest driver CUDA that runs fightlab's warp), or None when it is not (or either is
    unknown): major.minor compared, as ``fightlab.measure.bench.driver_check`` does."""
    if _older(driver_cuda, need, 2):
        return ("the driver supports CUDA {} but fightlab's warp needs CUDA >= {}: a host with a "
                "newer NVIDIA driver is needed".format(driver_cuda, need))
    return None


def driver_check(driver, need):
    """Why driver version ``driver`` ("550.54.14") is older than ``need`` ("580.65.06"), or None."""
    if _older(driver, need):
        return "NVIDIA driver {} is older than the {} required".format(driver, need)
    return None


def measure_mbit_s(url, max_bytes=BANDWIDTH_BYTES, timeout_s=BANDWIDTH_TIMEOUT_S):
    """Download bandwidth [Mbit/s, 10^6 bits] reading up to ``max_bytes`` from ``url`` within
    ``timeout_s`` (`fightlab.hosts.download_mb_per_s` × 8). Raises OSError (or ValueError for a
    bad URL) when nothing can be read."""
    return download_mb_per_s(url, max_bytes, timeout_s) * 8


def _smi(args):
    return subprocess.run(["nvidia-smi"] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=60).stdout


def run_checks(env, smi=_smi, bandwidth=measure_mbit_s):
    """(lines, reason): one line per check, and the first failure's reason ("" when every check
    passed). ``env``: the variables above; ``smi(args)`` returns ``nvidia-smi``'s output and
    ``bandwidth(url)`` Mbit/s (tests pass fakes)."""
    lines = []
    try:
        gpus = parse_gpus(smi(["--query-gpu=name,driver_version", "--format=csv,noheader"]))
        cuda = parse_cuda_version(smi([]))
    except (OSError, subprocess.SubprocessError) as e:
        return lines, "nvidia-smi failed: {}".format(e)
    if not gpus:
        return lines, "nvidia-smi lists no GPU"
    name, driver = gpus[0]
    lines.append("GPU {} (x{}), driver {}, CUDA {}".format(name, len(gpus), driver, cuda or "unknown"))
    asked = env.get("FIGHTLAB_GPU", "").strip()
    if asked and not same_gpu(asked, name):
        return lines, "asked for a {} but the host has a {}".format(asked, name)
    why = cuda_check(cuda, env.get("FIGHTLAB_MIN_CUDA", "").strip()) or \
        driver_check(driver, env.get("FIGHTLAB_MIN_DRIVER", "").strip())
    if why:
        return lines, why
    url, floor = env.get("FIGHTLAB_BANDWIDTH_URL", "").strip(), env.get("FIGHTLAB_MIN_MBIT_S", "").strip()
    if url and floor:
        try:
            mbit = bandwidth(url)
        except (OSError, ValueError) as e:
            return lines, "download from {} failed: {}".format(url, e)
        lines.append("download bandwidth {:.0f} Mbit/s from {}".format(mbit, url))
        if mbit < float(floor):
            return lines, "download bandwidth {:.0f} Mbit/s is below the {} Mbit/s required".format(mbit, floor)
    else:
        lines.append("download bandwidth: not checked (no FIGHTLAB_BANDWIDTH_URL / FIGHTLAB_MIN_MBIT_S)")
    return lines, ""


def main(env=None, out=None):
    """Run the checks (``env``: default os.environ), print the lines; 0 when every check
    passed, else `EXIT_FAILED` after the `FAILED_MARK` line."""
    env = os.environ if env is None else env
    out = sys.stdout if out is None else out
    lines, reason = run_checks(env)
    for line in lines:
        print("fightlab host check: " + line, file=out)
    if reason:
        print("{} {}".format(FAILED_MARK, reason), file=out)
        return EXIT_FAILED
    print("fightlab host check: passed", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
