"""The survey's options (``python -m fightlab survey launch``'s flags), each checked with a
one-line refusal before anything is written or rented (`make_options`), and the names they give
(SkyPilot's accelerator, a try's cluster, the task's environment).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from fightlab import meta
from fightlab.config import ConfigError
from fightlab.survey import hostcheck, offers
from fightlab.survey.reference import GPU_TYPES, gpu_type

__all__ = ["INFRAS", "PICKERS", "GIVE_UP_S", "AUTOSTOP_MIN", "TRIES", "MAX_TRIES", "BANDWIDTH_URL",
           "SurveyOptions", "parse_gpus", "validate_infra", "validate_cuda", "validate_url", "parse_bodies",
           "make_options", "warp_cuda", "accelerator", "cluster_name", "task_envs"]

#: the infrastructures (SkyPilot clouds) the survey rents from: skypilot[vast], [runpod],
#: [lambda], [aws]
INFRAS = ("vast", "runpod", "lambda", "aws")
#: who picks the host: SkyPilot (any infra), or fightlab through the vastai SDK (vast only)
PICKERS = ("sky", "vastai")
#: a host that does not answer within this [s] is given up (the study lost $0.51 on one)
GIVE_UP_S = 300.0
#: autostop [min]: an idle cluster tears itself down (--down) after this
AUTOSTOP_MIN = 10
#: hosts tried per GPU type, and the most (--tries)
TRIES, MAX_TRIES = 2, 10
#: the download the host check times (Cloudflare's speed test endpoint; --bandwidth-url)
BANDWIDTH_URL = "https://speed.cloudflare.com/__down?bytes=100000000"


@dataclass(frozen=True)
class SurveyOptions:
    """A survey, validated by :func:`make_options` (whose flags the fields are); requirements: a
    host's (`offers.OfferRequirements`); offers_found: recorded offers instead of a search."""

    gpus: tuple[str, ...]
    survey_id: str
    infra: str = "vast"
    picker: str = "sky"
    bodies: tuple[str, ...] = ("simple", "muscular-fast")
    tries: int = TRIES
    requirements: offers.OfferRequirements = offers.OfferRequirements()
    bandwidth_url: str = BANDWIDTH_URL
    time_limit_s: float = 960.0
    give_up_s: float = GIVE_UP_S
    autostop_min: int = AUTOSTOP_MIN
    offers_found: tuple[dict, ...] | None = None


def parse_gpus(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"RTX4090,L40S"`` -> ``("RTX 4090", "L40S")`` (`GPU_TYPES` names, case and spaces ignored).
    Raises ConfigError: empty, an unknown name (listing the valid ones), or a type named twice."""
    items = text.split(",") if isinstance(text, str) else list(text or [])
    items = [str(i).strip() for i in items if str(i).strip()]
    valid = ", ".join(g.replace(" ", "") for g in GPU_TYPES)
    if not items:
        raise ConfigError(f"--gpus must name one or more GPU types, comma-separated; valid: {valid}")
    out = []
    for i in items:
        try:
            g = gpu_type(i)
        except ConfigError:
            raise ConfigError(f"--gpus: unknown GPU type {i!r}; valid: {valid}") from None
        if g in out:
            raise ConfigError(f"--gpus names {g} twice")
        out.append(g)
    return tuple(out)


def validate_infra(infra: str) -> str:
    """``vast``, ``aws/us-east-1``, ``aws/us-east-1/us-east-1a``: a cloud of `INFRAS`, optionally
    ``/region`` and ``/zone``. Raises ConfigError: another cloud or a malformed value."""
    s = str(infra or "").strip().lower()
    parts = s.split("/")
    if parts[0] not in INFRAS or len(parts) > 3 or \
            not all(re.fullmatch(r"[a-z0-9][a-z0-9._-]*", x) for x in parts[1:]):
        raise ConfigError(f"--infra must be one of {', '.join(INFRAS)}, optionally /region[/zone] with "
                          f"non-empty parts, got {infra!r}")
    return s


def _number(name: str, v, lo: float = 0.0, integer: bool = False, hi: float | None = None):
    if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v > lo
                                   and (not integer or float(v).is_integer()) and (hi is None or v <= hi)):
        kind = "an integer" if integer else "a number"
        rng = f" in {lo + 1:g}..{hi:g}" if integer and hi is not None else (
            f" > {lo:g}" if hi is None else f" in ({lo:g}, {hi:g}]")
        raise ConfigError(f"{name} must be {kind}{rng}, got {v!r}")
    return int(v) if integer else float(v)


def _at_least(name: str, v, lo: float = 0.0) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo:
        raise ConfigError(f"{name} must be a number >= {lo:g}, got {v!r}")
    return float(v)


def validate_cuda(v: str, name: str = "--min-cuda") -> str:
    """A CUDA version ``x.y`` with x in 11..20 (``"13.0"``); else ConfigError naming ``name``."""
    m = re.fullmatch(r"([0-9]+)\.([0-9]+)", str(v).strip())
    if not m or not 11 <= int(m.group(1)) <= 20:
        raise ConfigError(f"{name} must be a CUDA version x.y with x in 11..20 (e.g. 13.0), or '' for not "
                          f"checked, got {v!r}")
    return f"{int(m.group(1))}.{int(m.group(2))}"


def validate_url(v: str, name: str = "--bandwidth-url") -> str:
    """``v`` when it is an http(s) URL with a host, or "" (not checked); else ConfigError."""
    from urllib.parse import urlsplit

    s = str(v or "").strip()
    if not s:
        return ""
    try:
        u = urlsplit(s)
        ok = u.scheme in ("http", "https") and bool(u.hostname) and not re.search(r"\s", s)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{name} must be an http:// or https:// URL (or '' for no bandwidth check), got {v!r}")
    return s


def parse_bodies(bodies) -> tuple[str, ...]:
    """``"simple,muscular-fast"`` (or a sequence) -> a tuple of bench's bodies, checked by bench's
    own rule (`fightlab.measure.bench.validate_bodies`: its ConfigError) before anything is rented."""
    from fightlab.measure.bench import validate_bodies

    items = bodies.split(",") if isinstance(bodies, str) else list(bodies or [])
    return tuple(validate_bodies([str(b).strip() for b in items if str(b).strip()]))


def make_options(gpus, infra: str = "vast", picker: str = "sky", bodies=("simple", "muscular-fast"),
                 tries: int = TRIES, min_cuda: str | None = "warp", min_driver: str | None = None,
                 min_mbit_s: float | None = offers.MIN_MBIT_S, max_usd_per_h: float | None = None,
                 bandwidth_url: str | None = BANDWIDTH_URL, time_limit_s: float | None = None,
                 survey_id: str | None = None, offers_json: Path | str | None = None,
                 give_up_s: float = GIVE_UP_S, autostop_min: int = AUTOSTOP_MIN) -> SurveyOptions:
    """Validated `SurveyOptions`; ``min_cuda`` ``"warp"`` = warp's CUDA toolkit (`warp_cuda`, read
    after every other value passed), None or "" = not checked; ``time_limit_s`` None = twice bench's
    shortest accepted limit for the bodies at full size (`fightlab.measure.bench.min_time_limit`,
    also the least accepted); ``bandwidth_url`` "" = the host's bandwidth is not timed.

    Raises:
      ConfigError: any bad value, one line naming its flag and the valid choices, or a flag that
        needs another (--picker vastai outside Vast, --max-price or --offers-json without it).
    """
    from fightlab.measure import bench

    gpus = parse_gpus(gpus)
    infra = validate_infra(infra)
    if picker not in PICKERS:
        raise ConfigError(f"--picker must be one of {', '.join(PICKERS)}, got {picker!r}")
    if picker == "vastai" and infra.split("/")[0] != "vast":
        raise ConfigError(f"--picker vastai rents from Vast only; got --infra {infra!r} (use --infra vast)")
    if offers_json is not None and picker != "vastai":
        raise ConfigError("--offers-json is the vastai picker's recorded search: give --picker vastai")
    if max_usd_per_h is not None and picker != "vastai":
        raise ConfigError(f"--max-price {max_usd_per_h:g} needs --picker vastai: SkyPilot's Vast backend "
                          "cannot filter by price (it rents the first offer of its own search)")
    bodies = parse_bodies(bodies)
    tries = _number("--tries", tries, integer=True, hi=MAX_TRIES)
    if min_cuda not in (None, "", "warp"):
        min_cuda = validate_cuda(min_cuda)
    if min_driver not in (None, "") and hostcheck.version_tuple(min_driver) is None:
        raise ConfigError(f"--min-driver must be a driver version such as 580.65.06, or '' for not checked, "
                          f"got {min_driver!r}")
    min_mbit_s = _at_least("--min-mbit-s", min_mbit_s)
    if max_usd_per_h is not None:
        max_usd_per_h = _number("--max-price", max_usd_per_h)
    bandwidth_url = validate_url(bandwidth_url)
    need = bench.min_time_limit(len(bodies), bench.TRAIN_S, "full")
    if time_limit_s is None:
        time_limit_s = 2 * need
    time_limit_s = _number("--time-limit-s", time_limit_s)
    if time_limit_s < need:
        raise ConfigError(f"--time-limit-s {time_limit_s:g} is too short for bench of {len(bodies)} bod"
                          f"{'y' if len(bodies) == 1 else 'ies'}: at least {need:g} s "
                          f"(fightlab.measure.bench.min_time_limit)")
    req = offers.OfferRequirements(min_cuda=None if min_cuda in ("warp", "") else min_cuda,
                                   min_driver=min_driver or None, min_mbit_s=min_mbit_s,
                                   max_usd_per_h=max_usd_per_h)
    sid = survey_id if survey_id is not None else meta.new_run_id()
    if not re.fullmatch(r"[a-z0-9]{1,16}", str(sid)):
        raise ConfigError(f"--survey-id must be 1–16 characters of a-z and 0-9, got {sid!r}")
    if offers_json is not None and not str(offers_json).strip():
        raise ConfigError("--offers-json is empty: give the path of a recorded offer list (JSON)")
    found = None if offers_json is None else tuple(offers.read_offers(offers_json))
    if min_cuda == "warp":
        req = dataclasses.replace(req, min_cuda=warp_cuda())
    return SurveyOptions(gpus=gpus, survey_id=str(sid), infra=infra, picker=picker, bodies=bodies,
                         tries=tries, requirements=req, bandwidth_url=bandwidth_url,
                         time_limit_s=time_limit_s, give_up_s=_number("--give-up-s", give_up_s),
                         autostop_min=_number("--autostop-min", autostop_min, integer=True),
                         offers_found=found)


def warp_cuda() -> str | None:
    """The oldest driver CUDA version that runs this warp, as ``"13.0"``
    (`fightlab.measure.bench.min_driver_cuda` of warp's toolkit), or None when warp does not say."""
    import warp as wp

    from fightlab.measure.bench import cuda_version, min_driver_cuda

    level, wp.config.log_level = wp.config.log_level, max(wp.config.log_level, wp.LOG_WARNING)
    try:  # no greeting: this reads a version, nothing runs on warp
        v = cuda_version(wp.get_cuda_toolkit_version())
    finally:
        wp.config.log_level = level
    return None if v is None else f"{min_driver_cuda(v):.1f}"


def accelerator(gpu: str) -> str:
    """SkyPilot's name of a GPU type: spaces dropped (``"RTX4090"``, as its Vast catalog spells
    them, sky/catalog/data_fetchers/fetch_vast.py; it accepts unknown names: `parse_gpus` checks)."""
    return gpu_type(gpu).replace(" ", "")


def cluster_name(survey_id: str, gpu: str, k: int) -> str:
    """``fl-<survey id>-<gpu>-<try>``, e.g. ``fl-1a2b3c-rtx4090-1`` (a valid SkyPilot and Vast name)."""
    return f"fl-{survey_id}-{accelerator(gpu).lower()}-{k}"


def task_envs(o: SurveyOptions, gpu: str) -> list[tuple[str, str]]:
    """The task's environment for ``gpu`` (``--env K=V`` each; declared in the task YAML's ``envs``)."""
    r = o.requirements
    return [("FIGHTLAB_SURVEY_ID", o.survey_id), ("FIGHTLAB_GPU", gpu),
            ("FIGHTLAB_BODIES", ",".join(o.bodies)), ("FIGHTLAB_MIN_CUDA", r.min_cuda or ""),
            ("FIGHTLAB_MIN_DRIVER", r.min_driver or ""),
            ("FIGHTLAB_MIN_MBIT_S", "" if r.min_mbit_s is None else f"{r.min_mbit_s:g}"),
            ("FIGHTLAB_BANDWIDTH_URL", o.bandwidth_url), ("FIGHTLAB_TIME_LIMIT_S", f"{o.time_limit_s:g}")]
