"""Figure file names per card: a figure drawn from rows of several GPUs is saved once per GPU,
``<name>_<gpu_slug(gpu)>`` (`fightlab figures` and the notebooks alike). Standard library only:
the CLI parser imports `fightlab.figures` before any plotting."""

from __future__ import annotations

import hashlib
import re

__all__ = ["gpu_slug", "per_gpu_name"]


def gpu_slug(gpu: str) -> str:
    """A file-name-safe slug of a GPU name: "NVIDIA H200" -> "nvidia-h200"; at most 60 characters
    (a longer one is cut and ends in 8 hex characters of the name's sha1)."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(gpu).lower()).strip("-") or "unknown-gpu"
    if len(slug) > 60:  # a file name stays well inside the filesystem's 255 bytes
        slug = f"{slug[:50].rstrip('-')}-{_name_hash(gpu)}"
    return slug


def _name_hash(gpu: str) -> str:
    return hashlib.sha1(str(gpu).encode()).hexdigest()[:8]


def per_gpu_name(name: str, gpu: str, gpus) -> str:
    """The file name (no suffix) of figure ``name`` drawn for ``gpu`` among the cards ``gpus`` of
    its table: ``name`` alone when there is one card, else ``name_<gpu_slug(gpu)>`` (e.g.
    ``figure2_world_sweep_nvidia-h200``), as `fightlab figures` and the notebooks save them. Two
    cards whose names give one slug (``"NVIDIA H200"``, ``"nvidia h200"``) each get 8 hex
    characters of their name's sha1 after it, so neither figure overwrites the other."""
    cards = set(map(str, gpus))
    if len(cards) == 1:
        return name
    slug = gpu_slug(gpu)
    if sum(gpu_slug(g) == slug for g in cards) > 1:
        slug = f"{slug}-{_name_hash(gpu)}"
    return f"{name}_{slug}"
