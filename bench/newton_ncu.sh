#!/usr/bin/env bash
# Where the single-launch Newton kernel's cycles wait, read by Nsight Compute: each body's solve
# (`fightlab profile --solver-loop single_launch`, NWORLD worlds, a few steps) under `ncu` with
# the warp-state and per-instruction sampling sections, on LAUNCHES launches of the kernel after
# SKIP. The stage clock (bench/newton_stages.sh) says which stage costs; this says which
# instructions stall and why (stall reason per SASS instruction). Writes under OUT/ncu/ (else
# ${FIGHTLAB_RUNS:-runs}/ncu/):
# <body>.ncu-rep (ncu's report), <body>-details.txt (the sections as text), <body>-source.csv (the
# SASS with its stall samples, where this ncu prints a source page), <body>-sections.csv (the same
# report's details page as `ncu --csv`: the form fightlab.measure.ncu reads, with the four sections
# of bench/gpu_batch.sh's factor profile among them) and <body>.log; the sections' row (`python -m fightlab.measure.ncu
# --probe newton`) goes to the same root's data/results/ncu.csv. With OUT set (the GPU machine's
# return folder, which brings back at most 8 files), the ncu/ folder is packed into $OUT/ncu.tgz.
# The source page has no source lines; on any machine with CUDA's nvdisasm, at the profiled commit:
#   python -m fightlab.measure.ncu_source --disassemble BODY BODY-nvdisasm.txt
#   python -m fightlab.measure.ncu_source BODY-source.csv BODY-nvdisasm.txt [--publish NCU_RUN_ID]
# places every sample on its Python line and function (the SASS is checked to be the same).
#
#   bash bench/newton_ncu.sh [BODIES] [NWORLD]       # default "muscular-fast simple" 1024
#
# SKIP (default 5), LAUNCHES (default 2) and NCU (the ncu binary) may be set. ncu replays each
# launch with the clocks left alone (--clock-control none); its durations are not the benchmark's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BODIES=${1:-"muscular-fast simple"}; NWORLD=${2:-1024}; SKIP=${SKIP:-5}; LAUNCHES=${LAUNCHES:-2}
die() { echo "newton_ncu: $*" >&2; exit 2; }
[[ "$NWORLD" =~ ^[1-9][0-9]*$ ]] || die "NWORLD must be a positive integer, got '$NWORLD'"
[[ "$SKIP" =~ ^[0-9]+$ ]] || die "SKIP must be a non-negative integer, got '$SKIP'"
[[ "$LAUNCHES" =~ ^[1-9][0-9]*$ ]] || die "LAUNCHES must be a positive integer, got '$LAUNCHES'"
for b in $BODIES; do
  case "$b" in simple|muscular-fast) ;; *) die "unknown body '$b'; choices: simple, muscular-fast" ;; esac
done
ncu_bin=${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1 || true)}
[ -n "$ncu_bin" ] && [ -x "$ncu_bin" ] || die "no ncu (Nsight Compute) on this machine; set NCU=/path/to/ncu"
# with OUT the folder is packed and removed at the end: it must be this run's own
[ -z "${OUT:-}" ] || [ ! -e "$OUT/ncu" ] || die "$OUT/ncu exists already: move it away (it is not overwritten)"
root=${OUT:-${FIGHTLAB_RUNS:-runs}}; dest=$root/ncu; mkdir -p "$dest" || die "cannot make $dest"
failed=0
for body in $BODIES; do
  rep="$dest/$body"
  # the kernel is Warp's "_kernel__locals___newton_<hash>" (fightlab/kernels/newton.py)
  if ! "$ncu_bin" --clock-control none -f -o "$rep.tmp" -k regex:'locals___newton' \
       --launch-skip "$SKIP" --launch-count "$LAUNCHES" \
       --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
       --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis \
       python3 -m fightlab profile --body "$body" --nworld "$NWORLD" --nstep 10 \
       --solver-loop single_launch --no-progress > "$rep.log" 2>&1; then
    echo "$body: ncu failed:"; tail -5 "$rep.log"; failed=1; continue
  fi
  mv -f "$rep.tmp.ncu-rep" "$rep.ncu-rep"
  # the report's pages, written to a temporary name each and renamed: (page, extra flags, file)
  for page in "details||-details.txt" "details|--csv|-sections.csv" "source|--csv --print-source sass|-source.csv"; do
    IFS='|' read -r name flags file <<< "$page"
    # shellcheck disable=SC2086
    if "$ncu_bin" --import "$rep.ncu-rep" --page "$name" $flags > "$rep$file.tmp" 2>&1; then
      mv -f "$rep$file.tmp" "$rep$file"
    else
      echo "$body: this ncu printed no $name page${flags:+ ($flags)}: $(head -c 200 "$rep$file.tmp")"
      rm -f "$rep$file.tmp"
    fi
  done
  [ -f "$rep-sections.csv" ] || failed=1  # no sections, no row
  if [ -f "$rep-sections.csv" ]; then  # its ncu row into <root>/data/results/ncu.csv (the card named by nvidia-smi)
    card=(); command -v nvidia-smi >/dev/null && card=(--gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
      --driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)")
    python3 -m fightlab.measure.ncu "$rep-sections.csv" "$NWORLD" --probe newton --body "$body" \
      --factorizations "$LAUNCHES" --root "$root" "${card[@]}" || failed=1
  fi
  [ ! -f "$rep-details.txt" ] || echo "$body: $(grep -E \
    'Warp Cycles Per Issued Instruction|Registers Per Thread|Achieved Occupancy|Duration' \
    "$rep-details.txt" | tr -s ' ' | head -8 | tr '\n' ';')"
done
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/ncu.tgz.tmp" -C "$OUT" ncu && mv -f "$OUT/ncu.tgz.tmp" "$OUT/ncu.tgz" && rm -rf "$OUT/ncu"
fi
exit "$failed"
