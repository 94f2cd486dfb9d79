#!/usr/bin/env bash
# Stage the GPU machine's bundle (../shared/gpu) in as few device calls as the tree leaves room for
# (bench/NOTES.md, 2026-12-02: why in chunks). A call carries at most 64 MiB: the working tree
# plus what `carry` names. The bundle (part_aa, part_ab, jupyter.tar.xz) and a warp kernel cache
# go as one tar split into chunks that fit beside the tree, .gpu/k0, .gpu/k1, …; .gpu/boot.sh
# copies each call's chunk to /opt/flstage/chunks and, once all are there, unpacks them, checks
# part_aa/part_ab against the bundle's SHA256SUMS and hands over to gpu-env.sh.
#
#   bash bench/gpu_stage.sh [SHARED_GPU_DIR]       # here, in the project root; prints the calls
# then per chunk i (the last with the first real step):
#   run  command: source .gpu/boot.sh || exit $?; ...   carry: [".gpu/kI", ".gpu/boot.sh", ".gpu/gpu-env.sh"]
# Later calls on the same machine carry only .gpu/boot.sh and .gpu/gpu-env.sh.
# The kernel cache is .gpu/warpcache.tar.xz when there is one (gpu_env_save_cache's, brought back),
# else the bundle's starter cache. The bundle lacks warp's CPU compiler (warp/bin/warp-clang.so),
# which the CPU backend's env kernels need on the GPU machine (compare-backends, a CPU-backend
# training): it rides along, xz-compressed, from this machine's warp-lang of the same version
# (.venv), and boot.sh puts it into the installed warp (NO_CLANG=1 leaves it out). Nothing in the project depends on .gpu/
# (git-ignored).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SRC=${1:-../shared/gpu}
[ -f "$SRC/bundle/a/part_aa" ] && [ -f "$SRC/bundle/b/part_ab" ] || { echo "gpu_stage: no bundle under $SRC/bundle" >&2; exit 2; }
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpu/' >> .git/info/exclude; }
mkdir -p .gpu
cp "$SRC/gpu-env.sh" .gpu/gpu-env.sh
# what travels with every call: tracked files and untracked ones git does not ignore
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
# margin: the carried boot.sh / gpu-env.sh and a few commits' growth before the chunk calls
# (stage right before them); MARGIN_MIB=2 for more room
limit=$((64 * 1024 * 1024)); margin=$(( ${MARGIN_MIB:-1} * 1024 * 1024 ))
chunk=$(( (limit - tree - margin) / 1048576 ))
[ "$chunk" -ge 8 ] || { echo "gpu_stage: the tree ($((tree / 1048576)) MiB) leaves < 8 MiB a call" >&2; exit 2; }
blob=$(mktemp -d)
trap 'rm -rf "$blob"' EXIT
cp "$SRC"/bundle/a/* "$SRC"/bundle/b/* "$blob"/
if [ -f .gpu/warpcache.tar.xz ]; then cp .gpu/warpcache.tar.xz "$blob"/; else cp "$SRC/warpcache-starter.tar.xz" "$blob/warpcache.tar.xz"; fi
clang=$(ls .venv/lib/python3*/site-packages/warp/bin/warp-clang.so 2>/dev/null | head -n 1 || true)
if [ "${NO_CLANG:-0}" = 1 ]; then
  echo "gpu_stage: NO_CLANG=1: warp's CPU compiler left out (one chunk less; no CPU backend there)" >&2
elif [ -n "$clang" ]; then
  [ -f .gpu/warp-clang.so.xz ] || xz -T0 -9 -c "$clang" > .gpu/warp-clang.so.xz
  cp .gpu/warp-clang.so.xz "$blob"/
else
  echo "gpu_stage: no warp-clang.so in .venv (bash scripts/setup.sh): the CPU backend will not run there" >&2
fi
(cd "$blob" && sha256sum part_aa part_ab > sums)
rm -rf .gpu/k[0-9]*
(cd .gpu && tar cf - -C "$blob" . | split -b "${chunk}M" -d - chunk)
n=0
for f in .gpu/chunk*; do mkdir -p ".gpu/k$n"; mv "$f" ".gpu/k$n/"; n=$((n + 1)); done
names=$(for ((i = 0; i < n; i++)); do printf '%s ' "chunk$(printf %02d "$i")"; done)
cat > .gpu/boot.sh <<EOF
# source .gpu/boot.sh — written by bench/gpu_stage.sh: $n chunks, one per call, then gpu-env.sh
_s=/opt/flstage; mkdir -p \$_s/chunks
for d in .gpu/k[0-9]*; do [ -d "\$d" ] && cp "\$d"/chunk* \$_s/chunks/ 2>/dev/null; done
if [ ! -f /opt/flsite/.ok ]; then
  _all=1; for c in $names; do [ -f \$_s/chunks/\$c ] || _all=0; done
  if [ \$_all = 1 ]; then
    (cd \$_s/chunks && cat $names) | tar x -C \$_s && (cd \$_s && sha256sum -c sums) \\
      && mkdir -p .gpu/b && mv -f \$_s/part_ab .gpu/b/part_ab && mv -f \$_s/warpcache.tar.xz .gpu/warpcache.tar.xz \\
      && rm -f \$_s/chunks/*
  else
    echo "boot: staged \$(ls \$_s/chunks | tr '\n' ' ')(of $n)"; return 0 2>/dev/null || exit 0
  fi
fi
source .gpu/gpu-env.sh || { return \$? 2>/dev/null || exit \$?; }
# warp's CPU compiler for the CPU backend (not in the bundle), once
if [ -f \$_s/warp-clang.so.xz ] && [ ! -f /opt/flsite/warp/bin/warp-clang.so ]; then
  xz -d -T0 < \$_s/warp-clang.so.xz > /opt/flsite/warp/bin/warp-clang.so && echo "boot: warp's CPU compiler restored"
fi
EOF
echo "gpu_stage: tree $((tree / 1048576)) MiB, $n chunks of ≤ $chunk MiB:"
for ((i = 0; i < n; i++)); do
  echo "  call $((i + 1)): carry [\".gpu/k$i\", \".gpu/boot.sh\", \".gpu/gpu-env.sh\"]  command: source .gpu/boot.sh || exit \$?; …"
done
