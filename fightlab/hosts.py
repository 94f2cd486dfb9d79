"""What a machine is and does, as facts and one probe (the bottom layer; stdlib only, Python 3.7
syntax, so the rented host's check, ``fightlab/survey/hostcheck.py``, imports it before fightlab
is installed): `same_gpu` (the one GPU-name match), `PUBLISHED_BANDWIDTH_GB_S` (the reference of
bench's bad-host check when no earlier rows of the card exist), `download_mb_per_s` (bench's and
the rented host's check), `GpuMemoryPeak` (the main job's GPU-memory column).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
import urllib.request

__all__ = ["gpu_words", "same_gpu", "PUBLISHED_BANDWIDTH_GB_S", "BANDWIDTH_SOURCES", "published_bandwidth",
           "download_mb_per_s", "GpuMemoryPeak", "visible_gpu"]

#: words a GPU's name carries that say nothing of the model
_VENDOR_WORDS = ("nvidia", "geforce", "tesla")
#: words after a model that make it another card ("RTX 3090 Ti" is not an "RTX 3090")
_OTHER_MODEL_WORDS = ("ti", "super", "d", "laptop", "mobile", "max-q")


def gpu_words(name):
    """The words of a GPU name, lower case, vendor words dropped, split at spaces, dashes and
    underscores: ``"NVIDIA A100-SXM4-80GB"`` -> ``["a100", "sxm4", "80gb"]``."""
    words = re.split(r"[\s_]+|-(?!q\b)", str(name).strip().lower())
    return [w for w in words if w and w not in _VENDOR_WORDS]


def same_gpu(asked, name):
    """True when ``name`` (``"NVIDIA GeForce RTX 4090"``) is the GPU type ``asked``
    (``"RTX 4090"``, ``"RTX4090"``): its first words (`gpu_words`; spaces, dashes and case
    ignored) spell ``asked``, so a variant after the type matches (``"H100"`` for ``"NVIDIA H100
    80GB HBM3"``, ``"A100"`` for ``"NVIDIA A100-SXM4-80GB"``, ``"T4"`` for ``"Tesla T4"``) and
    another model does not (``"L4"`` is not ``"NVIDIA L40S"``, ``"RTX 3090"`` is not ``"RTX 3090
    Ti"``: the word after the match must not be one of Ti, SUPER, D, Laptop, Mobile)."""
    a, words = "".join(gpu_words(asked)), gpu_words(name)
    for k in range(1, len(words) + 1):
        if "".join(words[:k]) == a:
            return k == len(words) or words[k] not in _OTHER_MODEL_WORDS
    return False


#: peak memory bandwidth [GB/s, 10^9 bytes] per GPU type, as published (`BANDWIDTH_SOURCES`).
#: A type sold in variants of different bandwidth gets its slowest variant's figure (A100: the
#: 40 GB PCIe card; H100: the PCIe card), so a slower variant is never taken for a bad host.
PUBLISHED_BANDWIDTH_GB_S = {
    "T4": 320.0, "L4": 300.0, "A100": 1555.0, "L40S": 864.0, "V100": 900.0, "H100": 2000.0,
    "H200": 4800.0, "RTX 3090": 936.0, "RTX 4090": 1008.0, "RTX 5080": 960.0, "RTX 5090": 1792.0,
    "RTX PRO 6000": 1792.0,
}

#: where each figure is published (NVIDIA's datasheets and product specification pages)
BANDWIDTH_SOURCES = {
    "T4": "NVIDIA T4 Tensor Core GPU datasheet: 320+ GB/s (16 GB GDDR6)",
    "L4": "NVIDIA L4 Tensor Core GPU datasheet: 300 GB/s (24 GB GDDR6)",
    "A100": "NVIDIA A100 Tensor Core GPU datasheet: 1,555 GB/s (40 GB PCIe); 1,935 (80 GB PCIe), "
            "2,039 (80 GB SXM)",
    "L40S": "NVIDIA L40S GPU datasheet: 864 GB/s (48 GB GDDR6)",
    "V100": "NVIDIA V100 Tensor Core GPU datasheet: 900 GB/s (PCIe and SXM2); V100S 1,134",
    "H100": "NVIDIA H100 Tensor Core GPU datasheet: 2 TB/s (PCIe 80 GB); 3.35 TB/s (SXM), 3.9 (NVL)",
    "H200": "NVIDIA H200 Tensor Core GPU datasheet: 4.8 TB/s (SXM and NVL, 141 GB HBM3e)",
    "RTX 3090": "NVIDIA GeForce RTX 3090 specifications: 936 GB/s (24 GB GDDR6X, 384-bit)",
    "RTX 4090": "NVIDIA GeForce RTX 4090 specifications: 1,008 GB/s (24 GB GDDR6X at 21 Gbps, 384-bit)",
    "RTX 5080": "NVIDIA GeForce RTX 5080 specifications: 960 GB/s (16 GB GDDR7 at 30 Gbps, 256-bit)",
    "RTX 5090": "NVIDIA GeForce RTX 5090 specifications: 1,792 GB/s (32 GB GDDR7 at 28 Gbps, 512-bit)",
    "RTX PRO 6000": "NVIDIA RTX PRO 6000 Blackwell datasheet: 1,792 GB/s (96 GB GDDR7, 512-bit)",
}


def published_bandwidth(name):
    """(GPU type, published peak bandwidth [GB/s]) of a GPU name (``"NVIDIA GeForce RTX 4090"``
    -> ``("RTX 4090", 1008.0)``), or None for a GPU (or a CPU) the table does not know."""
    for key in sorted(PUBLISHED_BANDWIDTH_GB_S, key=len, reverse=True):
        if same_gpu(key, name):
            return key, PUBLISHED_BANDWIDTH_GB_S[key]
    return None


def download_mb_per_s(url, max_bytes, timeout_s):
    """MB/s (10^6 bytes) of reading up to ``max_bytes`` from ``url`` within ``timeout_s`` [s].
    Raises OSError (ValueError for a malformed URL) when nothing can be read."""
    t0, n = time.perf_counter(), 0
    with urllib.request.urlopen(url, timeout=timeout_s) as f:  # noqa: S310 - a URL the user gave
        while n < max_bytes and time.perf_counter() - t0 < timeout_s:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            n += len(chunk)
    dt = time.perf_counter() - t0
    if n == 0:
        raise OSError("{}: no bytes read".format(url))
    return n / dt / 1e6


def visible_gpu(index: int | None, environ=None) -> str | None:
    """The GPU that CUDA calls ``index`` as ``nvidia-smi -i`` names it: CUDA numbers the devices
    of ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs, comma-separated) from 0, nvidia-smi ignores
    that variable. None for None, or an index past the visible list."""
    import os

    env = os.environ if environ is None else environ
    if index is None or "CUDA_VISIBLE_DEVICES" not in env:
        return None if index is None else str(index)
    visible = [v.strip() for v in env["CUDA_VISIBLE_DEVICES"].split(",") if v.strip()]
    return visible[index] if 0 <= index < len(visible) else None


class GpuMemoryPeak:
    """The most device memory in use [MiB] on one GPU (CUDA's ``index``, `visible_gpu`) while
    the ``with`` block runs.

    A thread reads ``nvidia-smi --query-gpu=memory.used`` every ``interval_s`` seconds: memory
    used by every process on that GPU (what a rented card must hold), to the sampling interval's
    resolution (a shorter spike can be missed). ``peak_mib`` is None where there is no
    ``nvidia-smi``, the index is not a GPU, or no read succeeded.

        with GpuMemoryPeak(0) as mem:
            run()
        mem.peak_mib        # e.g. 6143.0, or None
    """

    def __init__(self, index: int | None, interval_s: float = 0.5):
        self.index, self.interval_s = visible_gpu(index), float(interval_s)
        self.peak_mib: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._smi = shutil.which("nvidia-smi") if self.index is not None else None

    def _take(self) -> None:
        try:
            out = subprocess.run([self._smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                  "-i", str(self.index)], capture_output=True, text=True, timeout=10)
            if out.returncode == 0:
                v = float(out.stdout.strip().splitlines()[0])
                self.peak_mib = v if self.peak_mib is None else max(self.peak_mib, v)
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            pass

    def _sample(self) -> None:
        self._take()
        while not self._stop.wait(self.interval_s):
            self._take()

    def __enter__(self) -> "GpuMemoryPeak":
        if self._smi:
            self._thread = threading.Thread(target=self._sample, name="gpu-memory-peak", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
            self._take()  # the state at the end, after the last interval
