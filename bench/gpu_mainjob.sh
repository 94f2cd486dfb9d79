#!/usr/bin/env bash
# The main job on the GPU machine, a few notebooks per device call (each call is capped at 600 s):
#
#   source .gpu/boot.sh || exit $?; FIGHTLAB_COMMIT=<sha> bash bench/gpu_mainjob.sh LIMIT_S NN [NN ...]
#
# FIGHTLAB_COMMIT names the commit of the tree sent (the GPU machine's copy has no .git of this
# checkout: without it the rows would name the last landed commit, "-dirty").
# runs `python -m fightlab reproduce --only NN ... --size full --device cuda:0 --publish-times`
# under `timeout LIMIT_S`, then copies what the lead commits back to $OUT: the job's rows
# (data/results/reproduce.csv: one row per notebook, written as each finishes, so a call cut
# short still brings back the finished ones), the log, and a tarball of the executed notebooks,
# the figures they drew and the side-by-side comparisons. Rendering (notebook 01) uses EGL with
# the GL libraries carried in .gl/ and PyOpenGL from .whl/ (the bundle has neither); the GPU
# machine has no imageio-ffmpeg, so notebook 06 prints its "no video" line instead of rendering.
set -uo pipefail
limit=${1:?limit in seconds}; shift
[ -n "${FIGHTLAB_COMMIT:-}" ] || { echo "gpu_mainjob: set FIGHTLAB_COMMIT=<sha of the code sent> (rows record it)" >&2; exit 2; }
export FIGHTLAB_COMMIT
[ -d /opt/flsite ] || { echo "gpu_mainjob: not staged (source .gpu/boot.sh first)" >&2; exit 3; }
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
[ -d /tmp/site ] && export PYTHONPATH="/tmp/site:$PYTHONPATH"
if ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
export MUJOCO_GL=egl PYOPENGL_PLATFORM=egl
if [ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
only=(); for nb in "$@"; do only+=(--only "$nb"); done
tag=$(IFS=-; echo "$*")
timeout "$limit" python3 -m fightlab reproduce "${only[@]}" --size full --device cuda:0 --publish-times \
  2>&1 | tee "$OUT/reproduce-$tag.log"
rc=${PIPESTATUS[0]}
cp data/results/reproduce.csv "$OUT/reproduce-$tag.csv" 2>/dev/null
tar czf "$OUT/runs-$tag.tgz" --exclude='*.pt' --exclude='*.mp4' runs 2>/dev/null
ls -la "$OUT"
echo "gpu_mainjob: reproduce exit code $rc"
exit "$rc"
