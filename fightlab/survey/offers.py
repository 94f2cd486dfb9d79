"""Vast.ai offers: the search query and the filter fightlab applies itself.

SkyPilot's Vast backend cannot choose the host: in skypilot 0.14.1
``sky/provision/vast/utils.py:launch`` builds its own query, calls the vastai SDK's
``search_offers`` in its default order ``score-`` and rents ``instance_list[0]``; nothing filters
on driver, CUDA or bandwidth, orders by price, or takes a chosen offer id. So for Vast fightlab
searches itself (``vastai search offers QUERY -o dph_total --raw``), checks every offer again
(:func:`rank_offers`: a server-side filter is not taken on trust), and rents the cheapest that
passes (``--picker vastai``).

An offer is a dict as the vastai SDK returns it (``vastai.data.offer.Offer`` in vastai 1.9.1):
``id`` (the offer to rent), ``machine_id``, ``gpu_name`` (``"RTX 4090"``), ``num_gpus``,
``dph_total`` [$/h], ``cuda_max_good`` (the highest CUDA the driver supports), ``driver_version``,
``inet_down`` [Mbit/s], ``reliability`` (0–1; older answers: ``reliability2``), ``disk_space``
[GB], ``geolocation``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from fightlab.config import ConfigError
from fightlab.hosts import same_gpu
from fightlab.survey.reference import gpu_type
from fightlab.survey.hostcheck import version_tuple

__all__ = ["VAST_GPU_NAMES", "MIN_MBIT_S", "MIN_RELIABILITY", "OfferRequirements", "vast_query",
           "VAST_ORDER", "check_offer", "rank_offers", "offers_table", "read_offers"]

#: how Vast names each fightlab GPU type in its offers (Vast's web console spelling; a type Vast
#: spells otherwise finds no offer, and the search line shows the query that found none)
VAST_GPU_NAMES: dict[str, tuple[str, ...]] = {
    "T4": ("Tesla T4",), "L4": ("L4",), "A100": ("A100 PCIE", "A100 SXM4", "A100X"),
    "L40S": ("L40S",), "V100": ("Tesla V100",), "H100": ("H100 PCIE", "H100 SXM", "H100 NVL"),
    "H200": ("H200", "H200 NVL"), "RTX 3090": ("RTX 3090",), "RTX 4090": ("RTX 4090",),
    "RTX 5080": ("RTX 5080",), "RTX 5090": ("RTX 5090",),
    "RTX PRO 6000": ("RTX PRO 6000 WS", "RTX PRO 6000 S"),
}

#: the study's remedy for slow uploads and installs: hosts of at least 500 Mbit/s
MIN_MBIT_S = 500.0
#: Vast's reliability score below which an offer is skipped (one host never answered)
MIN_RELIABILITY = 0.95
#: the search order: cheapest first (SkyPilot's backend keeps the SDK's default, "score-")
VAST_ORDER = "dph_total"


@dataclass(frozen=True)
class OfferRequirements:
    """What a host must offer (None: not required): the driver's highest CUDA (``"13.4"``) and
    its version (``"580.65.06"``), at least; download [Mbit/s]; a price cap [$/h]; Vast's
    reliability (0–1); GPUs per host, exactly; disk [GB]."""

    min_cuda: str | None = None
    min_driver: str | None = None
    min_mbit_s: float | None = MIN_MBIT_S
    max_usd_per_h: float | None = None
    min_reliability: float | None = MIN_RELIABILITY
    num_gpus: int = 1
    min_disk_gb: float | None = None

    def __post_init__(self):
        for name in ("min_cuda", "min_driver"):
            v = getattr(self, name)
            if v is not None and version_tuple(v) is None:
                raise ConfigError(f"{name} must be a version such as 13.4 or 580.65.06, got {v!r}")
        for name in ("min_mbit_s", "max_usd_per_h", "min_reliability", "min_disk_gb"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0):
                raise ConfigError(f"{name} must be a number >= 0, got {v!r}")
        if isinstance(self.num_gpus, bool) or not isinstance(self.num_gpus, int) or self.num_gpus < 1:
            raise ConfigError(f"num_gpus must be a positive integer, got {self.num_gpus!r}")


def _gpu(gpu: str) -> str:
    gpu = gpu_type(gpu)
    if gpu not in VAST_GPU_NAMES:
        raise ConfigError(f"GPU type {gpu!r} has no Vast name; add it to "
                          f"fightlab.survey.offers.VAST_GPU_NAMES (known: {', '.join(VAST_GPU_NAMES)})")
    return gpu


def vast_query(gpu: str, req: OfferRequirements) -> str:
    """The vastai search query for ``gpu`` under ``req`` (``vastai search offers --help``), e.g.
    ``num_gpus=1 gpu_name in ["RTX 4090"] cuda_max_good>=13.4 inet_down>=500 reliability>=0.95``
    (plus the SDK's defaults: verified, rentable, not external); order it with `VAST_ORDER`.
    Raises ConfigError: an unknown GPU type, or one without a Vast name."""
    names = ", ".join(f'"{n}"' for n in VAST_GPU_NAMES[_gpu(gpu)])
    q = [f"num_gpus={req.num_gpus}", f"gpu_name in [{names}]"]
    q += [f"{key}{op}{v:g}" if isinstance(v, float) else f"{key}{op}{v}" for key, op, v in (
        ("cuda_max_good", ">=", req.min_cuda or None), ("driver_version", ">=", req.min_driver or None),
        ("inet_down", ">=", req.min_mbit_s), ("reliability", ">=", req.min_reliability),
        ("dph_total", "<=", req.max_usd_per_h), ("disk_space", ">=", req.min_disk_gb)) if v is not None]
    return " ".join(q)


def _num(offer: dict, *keys) -> float | None:
    for k in keys:
        v = offer.get(k)
        if isinstance(v, bool):
            continue
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            return x
    return None


def check_offer(offer: dict, gpu: str, req: OfferRequirements) -> str:
    """Why ``offer`` does not meet ``req`` for ``gpu`` (the first reason, a phrase), or ""
    when it does. A field the requirement needs and the offer lacks fails it."""
    name = str(offer.get("gpu_name", ""))
    if not same_gpu(gpu, name):
        return f"GPU {name or 'unknown'} is not a {gpu}"
    n = _num(offer, "num_gpus")
    if n != req.num_gpus:
        return f"{n if n is None else int(n)} GPUs, not {req.num_gpus}"
    if req.min_cuda:
        have = offer.get("cuda_max_good")
        ht, wt = version_tuple(have) if have is not None else None, version_tuple(req.min_cuda)
        if ht is None or wt is None or ht[:2] < wt[:2]:
            return f"CUDA {have} < {req.min_cuda}"
    if req.min_driver:
        have = offer.get("driver_version")
        ht = version_tuple(have) if have is not None else None
        if ht is None or ht < version_tuple(req.min_driver):
            return f"driver {have} < {req.min_driver}"
    for need, keys, said in ((req.min_mbit_s, ("inet_down",), "download {} Mbit/s < {:g}"),
                             (req.min_reliability, ("reliability", "reliability2"), "reliability {} < {:g}")):
        have = _num(offer, *keys)
        if need is not None and (have is None or have < need):
            return said.format(have, need)
    price = _num(offer, "dph_total")
    if price is None or price <= 0:
        return f"no price ({offer.get('dph_total')!r})"
    if req.max_usd_per_h is not None and price > req.max_usd_per_h:
        return f"${price:.3f}/h > ${req.max_usd_per_h:g}/h"
    disk = _num(offer, "disk_space")
    if req.min_disk_gb is not None and (disk is None or disk < req.min_disk_gb):
        return f"disk {disk} GB < {req.min_disk_gb:g}"
    return ""


def rank_offers(offers: Iterable[dict], gpu: str, req: OfferRequirements,
                exclude_machines: Sequence = ()) -> tuple[list[dict], list[tuple[dict, str]]]:
    """(the offers that pass :func:`check_offer`, cheapest first, then the more reliable, then
    the lower id; the others with their reason, "tried" for a machine in ``exclude_machines``)."""
    gpu = _gpu(gpu)
    tried = {str(m) for m in exclude_machines}
    judged = [(o, "tried" if str(o.get("machine_id")) in tried else check_offer(o, gpu, req)) for o in offers]
    ok, bad = [o for o, why in judged if not why], [(o, why) for o, why in judged if why]
    ok.sort(key=lambda o: (_num(o, "dph_total"), -(_num(o, "reliability", "reliability2") or 0),
                           str(o.get("id"))))
    return ok, bad


def offers_table(offers: Iterable[dict], gpu: str, req: OfferRequirements) -> pd.DataFrame:
    """One row per offer, in :func:`rank_offers`' order, the rejected last with their reason."""
    ok, bad = rank_offers(list(offers), gpu, req)
    rows = [dict(id=o.get("id"), machine_id=o.get("machine_id"), gpu_name=o.get("gpu_name"),
                 usd_per_h=_num(o, "dph_total"), cuda=o.get("cuda_max_good"),
                 driver=o.get("driver_version"), inet_down_mbit_s=_num(o, "inet_down"),
                 reliability=_num(o, "reliability", "reliability2"),
                 geolocation=o.get("geolocation"), ok=not why, reason=why)
            for o, why in [(o, "") for o in ok] + bad]
    return pd.DataFrame(rows, columns=["id", "machine_id", "gpu_name", "usd_per_h", "cuda", "driver",
                                       "inet_down_mbit_s", "reliability", "geolocation", "ok", "reason"])


def read_offers(path: Path | str) -> list[dict]:
    """Offers from a JSON file (a list of offer dicts, as ``vastai search offers --raw`` prints,
    or ``{"offers": [...]}``). Raises FileNotFoundError: no such file; ConfigError: an empty path,
    a folder, not UTF-8, not JSON, not a list of objects, or an offer without an ``id``."""
    if not str(path).strip():
        raise ConfigError("the offers file's path is empty: give a recorded offer list (JSON)")
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not an offer list (JSON file)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}), not an offer list (JSON)") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("offers"), list):
        data = data["offers"]
    if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
        raise ConfigError(f"{path}: expected a list of offers (JSON objects)")
    for i, o in enumerate(data):
        if "id" not in o:
            raise ConfigError(f"{path}: offer {i} has no 'id'")
    return data

