#!/usr/bin/env bash
# Seconds per training iteration of two versions of fightlab on one GPU, interleaved A B A B so
# that drift of the card hits both: each body at 1024 worlds, solo, the defaults, ITERS
# iterations (the first WARM left out), REPS runs per version; the median of each run's
# iteration wall time (rollout, update) from its rows.csv, then the median over runs.
#
#   bash bench/seconds_per_iteration_ab.sh BEFORE_DIR [ITERS] [REPS]
#
# BEFORE_DIR holds the other version's `fightlab/` package (e.g. `git archive <commit> fightlab |
# tar x -C .gpu-before`; BEFORE_COMMIT=<commit> names it in the rows); "after" is this checkout. Prints one line per run and a table last;
# DEVICE, NWORLD, WARM and PY (the interpreter) may be set for a smoke run on the CPU; SETS
# (space-separated KEY=VALUE) are passed to both versions' `train` as `--set` (e.g.
# SETS=solver_loop=single_launch) and recorded in the rows' params; BEFORE_SETS / AFTER_SETS
# replace SETS for one version (e.g. BEFORE_DIR . with AFTER_SETS=solver_loop=single_launch: the
# same code, MuJoCo Warp's solve against the single launch);
# the per-run CSV goes to ${OUT:-runs}/seconds_per_iteration_ab.csv (written under a temporary name,
# renamed at the end: an earlier one stays until then).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BEFORE=${1:?usage: bash bench/seconds_per_iteration_ab.sh BEFORE_DIR [ITERS] [REPS]}
ITERS=${2:-40}; REPS=${3:-2}; WARM=${WARM:-5}; DEVICE=${DEVICE:-cuda:0}; NWORLD=${NWORLD:-1024}
BEFORE=$(cd "$BEFORE" && pwd); PY=${PY:-python3}; here=$PWD
BEFORE_SETS=${BEFORE_SETS-${SETS:-}}; AFTER_SETS=${AFTER_SETS-${SETS:-}}
dest=${OUT:-runs}; mkdir -p "$dest"; dest=$(cd "$dest" && pwd)
final="$dest/seconds_per_iteration_ab.csv"; csv="$final.tmp.$$"  # renamed onto $final at the end
echo "version,body,rep,nworld,iterations,s_per_iter,rollout_s,update_s,host_reads,commit" > "$csv"
work=$(mktemp -d)
trap 'rm -rf "$work" "$csv"' EXIT
set -f  # SETS are KEY=VALUE words, never file patterns
failed=0
for path in "$BEFORE" "$PWD"; do  # which package each version imports
  (cd "$work" && PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" $PY -c 'import fightlab; print("package:", fightlab.__file__)')
done
for body in simple muscular-fast; do
  for ((r = 0; r < REPS; r++)); do
    for version in before after; do
      path=$PWD; vsets=$AFTER_SETS; [ "$version" = before ] && path=$BEFORE && vsets=$BEFORE_SETS
      sets=(); for kv in $vsets; do sets+=(--set "$kv"); done
      run="$work/$version-$body-$r"
      (cd "$work" && PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" $PY -m fightlab train --body "$body" --nworld "$NWORLD" --device "$DEVICE" \
         --max-iterations "$ITERS" --no-progress --run-dir "$run" ${sets[@]+"${sets[@]}"} > "$run.log" 2>&1) \
        || { echo "$version $body failed:"; tail -5 "$run.log"; failed=$((failed + 1)); continue; }
      $PY - "$run/rows.csv" "$version" "$body" "$r" "$WARM" "${FIGHTLAB_COMMIT:-$(git rev-parse --short HEAD)}" "$NWORLD" >> "$csv" <<'PY'
import csv, statistics, sys
path, version, body, rep, warm, commit, _ = sys.argv[1:]
rows = list(csv.DictReader(open(path)))[int(warm):]
med = lambda k: statistics.median(float(r[k]) for r in rows)
print(f"{version},{body},{rep},{sys.argv[7]},{len(rows)},{med('wall_s'):.5f},{med('rollout_s'):.5f},"
      f"{med('update_s'):.5f},{med('host_reads'):.0f},{commit if version == 'after' else 'before'}")
PY
      tail -1 "$csv"
    done
  done
done
# one `versions` row per run (GPU, driver, versions from this machine) under $dest/data/results
(cd "$work" && PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" $PY - "$csv" "$DEVICE" "${BEFORE_COMMIT:-unknown}" "$ITERS" "$WARM" "$dest" "$BEFORE_SETS" "$AFTER_SETS") <<'PY'
import csv, sys
from fightlab import results
path, device, before, iters, warm, dest, before_sets, after_sets = sys.argv[1:]
n = 0
for r in csv.DictReader(open(path)):
    after = r["version"] == "after"
    sets = after_sets if after else before_sets
    row = results.run_metadata(body=r["body"], nworld=int(r["nworld"]), seed=0, device=device, params={
        "study": "seconds_per_iteration_ab", "version": r["version"], "rep": int(r["rep"]),
        "code_commit": r["commit"] if after else before, "max_iterations": int(iters), "skip": int(warm),
        **({"sets": sets.split()} if sets else {})})
    row.update(after=after, iterations=int(r["iterations"]), s_per_iter=float(r["s_per_iter"]),
               rollout_s_per_iter=float(r["rollout_s"]), update_s_per_iter=float(r["update_s"]),
               host_reads_per_iter=float(r["host_reads"]))
    results.append_row("versions", row, dest)
    n += 1
print(f"rows: {n} in {results.results_path('versions', dest)}" if n else "rows: none (no training finished)")
PY
$PY - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"{'body':14} {'before s/it':>12} {'after s/it':>11} {'change':>8}  (median over runs; rollout / update after)")
for body in ("simple", "muscular-fast"):
    m = {v: [float(r["s_per_iter"]) for r in rows if r["body"] == body and r["version"] == v] for v in ("before", "after")}
    if m["before"] and m["after"]:
        b, a = statistics.median(m["before"]), statistics.median(m["after"])
        ra = [r for r in rows if r["body"] == body and r["version"] == "after"]
        print(f"{body:14} {b:12.4f} {a:11.4f} {100 * (a / b - 1):+7.1f}%  "
              f"({statistics.median(float(r['rollout_s']) for r in ra):.4f} / "
              f"{statistics.median(float(r['update_s']) for r in ra):.4f})")
PY
mv "$csv" "$final"
if [ "$failed" -gt 0 ]; then
  echo "seconds_per_iteration_ab: $failed training(s) failed (above); the table holds the others" >&2
  exit 1
fi
