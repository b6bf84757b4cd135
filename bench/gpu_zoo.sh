#!/usr/bin/env bash
# The whole hack zoo and honest zoo (examples/zoo.json) through `kbv eval` on the GPU machine:
# every file with --device cuda, except the CPU files whose C++ extension loops over host
# memory, which run with --device cpu on the same machine (the table says which). Results:
#   $OUT/results/<file>.json   one kbv.result/1 per zoo file
#   $OUT/logs/<file>.log       kbv's stderr
#   $OUT/zoo_table.md          the table, detection rate, false-positive rate
#   $OUT/gpu-zoo.tgz           all of the above, packed
# Expected runtime on the H200 (16 cores): ~1.5 min to build kbv, then ~3-4 min for 54
# evaluations, 8 at a time (the 12 CUDA builds, ~25-80 s each, start first); the evaluations
# stop at ZOO_BUDGET_S (default 420 s) whatever happens.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-zoo}
JOBS=${JOBS:-8}
mkdir -p "$OUT/results" "$OUT/logs"
export PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-$PWD/.kbv-cache}
started=$(date +%s)

if [ ! -x build/kbv ] || [ "${REBUILD:-0}" = 1 ]; then
  { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKBV_BUILD_TESTS=OFF &&
    cmake --build build -j"$(nproc)"; } > "$OUT/logs/build.log" 2>&1 ||
    { tail -40 "$OUT/logs/build.log"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > "$OUT/gpu.csv" 2>&1

run_one() {
  local rel=$1 device=$2 size=$3 problem=$4 slug=$5
  local t0=$(date +%s)
  build/kbv eval --problem "$problem" --candidate "examples/$rel" --device "$device" \
    --size "$size" --draws 2 --samples 10 --rounds 2 --quiet \
    --json "$OUT/results/$slug.json" > "$OUT/logs/$slug.log" 2>&1
  local rc=$?
  echo "$rel device=$device size=$size rc=$rc $(( $(date +%s) - t0 ))s"
}
export -f run_one
export OUT

python3 bench/zoo_table.py plan > "$OUT/plan.txt"
# A budget for the evaluations, so the table and the archive are always written inside the
# device tool's 10-minute limit (files not finished by then show as "no result").
timeout "${ZOO_BUDGET_S:-420}" xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ < "$OUT/plan.txt" |
  tee "$OUT/runs.txt"

python3 bench/zoo_table.py table "$OUT/results" > "$OUT/zoo_table.md"
status=$?
echo "total $(( $(date +%s) - started ))s" | tee -a "$OUT/runs.txt"
cat "$OUT/zoo_table.md"
tar czf "$OUT/gpu-zoo.tgz" -C "$OUT" results logs zoo_table.md zoo_summary.json runs.txt plan.txt gpu.csv
exit $status
