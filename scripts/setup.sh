#!/usr/bin/env bash
# Set up fightlab on a fresh Linux machine with python3 >= 3.11: a .venv in the repository root
# with fightlab installed editable plus the test, rsl and export extras (EXTRAS=... picks others; scripts/run.sh
# and scripts/test.sh both use the default; test.sh puts SkyPilot in its own .venv-survey).
# Idempotent: re-running reuses the .venv and skips pip when pyproject.toml and EXTRAS are
# unchanged since the last successful install (FORCE=1 reinstalls).
# Works from any directory. Override the interpreter with PYTHON=/path/to/python3.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
PYTHON="${PYTHON:-python3}"
EXTRAS="${EXTRAS:-test,rsl,export}"
VENV="$ROOT/.venv"
STAMP="$VENV/.fightlab-installed"

say() { echo "[setup] $*"; }

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "[setup] error: '$PYTHON' not found; install Python >= 3.11 or set PYTHON=..." >&2
  exit 1
fi

# room to install: .venv is about 2.3 GB and pip unpacks each wheel beside it; a disk that fills
# mid-install leaves a half-made .venv behind pip's OSError. `need_disk` runs before each step that
# writes there (the venv, a torch install, pip) and refuses in one line below SETUP_MIN_FREE_GB GiB
# free (default 4; 0 turns the check off). A `df` that fails or prints no number skips the check.
MIN_FREE_GB="${SETUP_MIN_FREE_GB:-4}"
if ! [[ "$MIN_FREE_GB" =~ ^[0-9]{1,7}$ ]]; then
  echo "[setup] error: SETUP_MIN_FREE_GB must be a whole number of GiB from 0 to 9999999, got '$MIN_FREE_GB'" >&2
  exit 2
fi
MIN_FREE_GB=$((10#$MIN_FREE_GB))  # decimal, leading zeros and all
need_disk() {  # need_disk WHAT: exit 1 when the disk of the repository has too little room for WHAT
  local free_kib
  [ "$MIN_FREE_GB" -gt 0 ] || return 0
  free_kib="$(df -Pk "$ROOT" 2>/dev/null | awk 'NR == 2 {print $4}' || true)"
  [[ "$free_kib" =~ ^[0-9]{1,15}$ ]] || return 0
  if [ "$free_kib" -lt $((MIN_FREE_GB * 1024 * 1024)) ]; then
    echo "[setup] error: $((free_kib / 1024)) MiB free on the disk of $ROOT; $1 needs about ${MIN_FREE_GB} GiB (free some space, or set SETUP_MIN_FREE_GB: a lower bar in GiB, 0 for none)" >&2
    exit 1
  fi
}
# `setup.sh --check-disk WHAT`: only the check (scripts/test.sh, before its .venv-survey)
if [ "${1:-}" = "--check-disk" ]; then
  need_disk "${2:-the install}"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "[setup] error: $("$PYTHON" --version 2>&1) is too old; fightlab needs Python >= 3.11" >&2
    exit 1
  fi
  need_disk "creating $VENV"
  say "creating $VENV with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
else
  say "reusing $VENV ($("$VENV/bin/python" --version 2>&1))"
fi

PY="$VENV/bin/python"

# OSMesa: MuJoCo's offscreen renderer (mujoco.Renderer, MUJOCO_GL=osmesa) draws Figure 1 on a CPU
# machine without a display or GPU. Install Debian's libosmesa6 only when the library is missing,
# apt-get exists and we are root or have password-less sudo; never fail the setup over it (the
# render test then skips and names the missing library).
have_osmesa() {
  "$PYTHON" -c 'import ctypes.util, sys; sys.exit(0 if ctypes.util.find_library("OSMesa") else 1)' 2>/dev/null
}
if have_osmesa; then
  say "OSMesa present (offscreen rendering for Figure 1)"
elif ! command -v apt-get >/dev/null 2>&1; then
  say "warning: libOSMesa not found and no apt-get here; install OSMesa to render Figure 1"
else
  SUDO=""
  if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO="none"; fi
  fi
  if [ "$SUDO" = "none" ]; then
    say "warning: libOSMesa not found and neither root nor password-less sudo; run: sudo apt-get install -y libosmesa6"
  else
    # another apt (unattended-upgrades, a second setup) may hold apt's locks for a moment: wait
    # for them (APT_LOCK_TIMEOUT s, default 120) instead of giving up, and retry `update` twice
    APT="${SUDO:+$SUDO }env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=${APT_LOCK_TIMEOUT:-120}"
    apt_update() {
      local try
      for try in 1 2 3; do
        $APT update && return 0
        [ "$try" = 3 ] || { say "apt-get update failed (try $try of 3; apt's lock held?): again in 15 s"; sleep 15; }
      done
      return 1
    }
    say "libOSMesa not found: ${SUDO:+$SUDO }apt-get update && ${SUDO:+$SUDO }apt-get install -y libosmesa6"
    if apt_update && $APT install -y libosmesa6; then
      have_osmesa && say "installed libosmesa6" || say "warning: libosmesa6 installed but libOSMesa still not found"
    else
      say "warning: could not install libosmesa6 (continuing; the Figure 1 render test will skip)"
    fi
  fi
fi

# Editable installs from pyproject.toml need pip >= 21.3; upgrade pip only if it is older.
if ! "$PY" -c 'import sys, pip; v = tuple(int(x) for x in pip.__version__.split(".")[:2]); sys.exit(0 if v >= (21, 3) else 1)' 2>/dev/null; then
  need_disk "upgrading pip"
  say "pip in $VENV is older than 21.3: upgrading pip"
  "$PY" -m pip install --upgrade pip
fi

want="$(sha256sum pyproject.toml | cut -d' ' -f1) [$EXTRAS]"
have="$(cat "$STAMP" 2>/dev/null || true)"
# installed, editable, from this folder? (reads metadata only: never imports fightlab)
installed_here() {
  # run from / so that the build's ./fightlab.egg-info does not shadow the installed record
  (cd / && "$PY" - "$ROOT" <<'PYEOF' 2>/dev/null
import json, sys, pathlib, importlib.metadata as m
d = json.loads(m.distribution("fightlab").read_text("direct_url.json") or "{}")
sys.exit(0 if d.get("url") == pathlib.Path(sys.argv[1]).as_uri() and d.get("dir_info", {}).get("editable") else 1)
PYEOF
  )
}

# torch on a machine without an NVIDIA GPU: PyTorch's CPU build (≈ 200 MB) from PyTorch's own
# index, as pytorch.org's install guide says, instead of PyPI's CUDA build (several GB). Only when
# the pinned torch is not installed yet and that index answers; TORCH_CPU=0 leaves torch to pip.
TORCH_PIN="$(grep -o '"torch==[^"]*"' pyproject.toml | tr -d '"' || true)"
CPU_INDEX="https://download.pytorch.org/whl/cpu"
torch_pinned() {  # the pinned version installed (a local label such as +cpu ignored); metadata only
  "$PY" - "${TORCH_PIN#torch==}" <<'PYEOF' 2>/dev/null
import sys, importlib.metadata as m
sys.exit(0 if m.version("torch").split("+")[0] == sys.argv[1] else 1)
PYEOF
}
torch_cpu_build() {  # the installed torch is a CPU-only build (+cpu)
  "$PY" -c 'import sys, importlib.metadata as m; sys.exit(0 if m.version("torch").endswith("+cpu") else 1)' 2>/dev/null
}
if [ -n "$TORCH_PIN" ] && nvidia-smi -L >/dev/null 2>&1 && torch_cpu_build; then
  # a .venv made on a CPU machine, now on a GPU one: PyPI's CUDA build of the same pin
  need_disk "torch's CUDA build"
  say "an NVIDIA GPU here but torch is a CPU build: reinstalling $TORCH_PIN from PyPI (the CUDA build)"
  "$PY" -m pip install --force-reinstall --no-deps "$TORCH_PIN"
fi
if [ -n "$TORCH_PIN" ] && [ "${TORCH_CPU:-auto}" != "0" ] && ! nvidia-smi -L >/dev/null 2>&1 && ! torch_pinned; then
  need_disk "installing torch"
  if "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=10)' "$CPU_INDEX" 2>/dev/null; then
    say "no NVIDIA GPU here: $TORCH_PIN, CPU build, from $CPU_INDEX (TORCH_CPU=0: PyPI's CUDA build)"
    "$PY" -m pip install "$TORCH_PIN" --index-url "$CPU_INDEX" \
      || say "warning: the CPU build did not install; torch comes from pip's usual sources"
  else
    say "no NVIDIA GPU here, and $CPU_INDEX does not answer: torch from pip's usual sources"
  fi
fi

if [ "${FORCE:-0}" != "1" ] && [ "$want" = "$have" ] && installed_here; then
  say "fightlab already installed and pyproject.toml and extras [$EXTRAS] unchanged: skipping pip install (FORCE=1 to redo)"
else
  need_disk "installing fightlab and its dependencies"
  say "pip install -e '.[$EXTRAS]' (pinned versions from pyproject.toml)"
  "$PY" -m pip install -e ".[$EXTRAS]"
  echo "$want" > "$STAMP"
fi

say "done: fightlab $("$PY" -c 'import importlib.metadata as m; print(m.version("fightlab"))') installed editable in $VENV"
