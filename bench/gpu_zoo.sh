#!/usr/bin/env bash
# The whole hack zoo and honest zoo (examples/zoo.json) through `kbv eval` on the GPU machine:
# every file with --device cuda, except the CPU files whose C++ extension loops over host
# memory, which run with --device cpu on the same machine (the table says which). Results:
#   $OUT/results/<file>.json   one kbv.result/1 per zoo file
#   $OUT/logs/<file>.log       kbv's stderr
#   $OUT/zoo_table.md          the table, detection rate, false-positive rate
#   $OUT/gpu-zoo.tgz           all of the above, packed
# Expected runtime on the H200 (16 cores): ~1.5 min to build kbv, ~4-5 min for the first 54
# evaluations (10 at a time, CUDA builds first), ~1.5 min for the 3 large-size files alone;
# hard budgets (ZOO_PHASE1_S=330, ZOO_PHASE2_S=150) keep it under 10 minutes in all. The zoo has
# 81 files since issue 19: within one 10-minute device call, run it in two with ZOO_ONLY, e.g.
# ZOO_ONLY='^(hacks|honest)/cuda/' (20 CUDA builds), then ZOO_ONLY='^(hacks|honest)/[a-bd-z]'
# (the rest), each into its own OUT; zoo_table.py table reads one results folder (copy both in).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-zoo}
JOBS=${JOBS:-10}
mkdir -p "$OUT/results" "$OUT/logs"
export PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-$PWD/.kbv-cache}
started=$(date +%s)

if [ ! -x build/kbv ] || [ "${REBUILD:-0}" = 1 ]; then
  bash bench/gpu_build.sh "$OUT/logs/build.log" || exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > "$OUT/gpu.csv" 2>&1

run_one() {
  local rel=$1 device=$2 size=$3 problem=$4 slug=$5 mode=${6:-full}
  local t0=$(date +%s) json="$OUT/results/$slug.json" extra=()
  if [ "$mode" = warm ]; then  # builds the extension and checks correctness; judged later
    json="$OUT/warm/$slug.json"
    extra=(--no-timing)
  fi
  build/kbv eval --problem "$problem" --candidate "examples/$rel" --device "$device" \
    --size "$size" --draws 2 --samples 10 --rounds 2 --quiet "${extra[@]}" \
    --json "$json" > "$OUT/logs/$slug.$mode.log" 2>&1
  local rc=$?
  echo "$rel device=$device size=$size mode=$mode rc=$rc $(( $(date +%s) - t0 ))s"
}
export -f run_one
export OUT
mkdir -p "$OUT/warm"

python3 bench/zoo_table.py plan | grep -E "${ZOO_ONLY:-.}" > "$OUT/plan.txt"  # ZOO_ONLY: a regex of files
# Phase 1, JOBS at a time: every small-size file; the large-size files (timing-sensitive: the
# roofline floor, the side stream) only build and run their correctness checks. Phase 2: the
# large-size files one at a time on an otherwise idle GPU, so time slicing between processes
# cannot distort their timing, and the files marked alone. Budgets keep the whole run inside the device tool's 10 minutes.
# A file marked alone in the manifest (it takes the device's free memory) skips phase 1 and runs
# in phase 2, built there.
awk '$6 == "shared" {print $1, $2, $3, $4, $5, ($3 == "large" ? "warm" : "full")}' \
  "$OUT/plan.txt" |
  timeout "${ZOO_PHASE1_S:-330}" xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ |
  tee "$OUT/runs.txt"
awk '$3 == "large" || $6 == "alone" {print $1, $2, $3, $4, $5, "full"}' "$OUT/plan.txt" |
  timeout "${ZOO_PHASE2_S:-150}" xargs -P 1 -L 1 bash -c 'run_one "$@"' _ |
  tee -a "$OUT/runs.txt"

python3 bench/zoo_table.py table "$OUT/results" > "$OUT/zoo_table.md"
status=$?
echo "total $(( $(date +%s) - started ))s" | tee -a "$OUT/runs.txt"
cat "$OUT/zoo_table.md"
tar czf "$OUT/gpu-zoo.tgz" -C "$OUT" results warm logs zoo_table.md zoo_summary.json runs.txt \
  plan.txt gpu.csv
exit $status
