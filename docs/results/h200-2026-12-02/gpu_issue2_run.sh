#!/usr/bin/env bash
# Issue 2's timed table and the H200 run database (issue 5's report input), in one device call:
# probe the machine, build kbv, then `kbv run` over the bundled suite with its honest CUDA
# candidates at KernelBench-like sizes (parallel build-ahead, then one timed evaluation at a time).
#   KBV_GPU_BUDGET=480 docs/results/h200-2026-12-02/gpu_issue2_run.sh
#   (run by the device tool with carry .deps)
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root: this one-off lives beside its results
export OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
bench/gpu_probe.sh > /dev/null
export PYTHONUNBUFFERED=1
start=$(date +%s)
bench/gpu_suite.sh build || { echo "build failed"; exit 1; }
echo "build done in $(( $(date +%s) - start )) s"
left=$(( ${KBV_GPU_BUDGET:-480} - ($(date +%s) - start) ))
timeout "$left" build/kbv run --problems problems --candidates examples/candidates/cuda \
  --devices cuda --db "$OUT/h200-suite.sqlite" --size large --draws 2 --samples 20 --rounds 2 \
  --cache-dir "$PWD/.kbv-cache" > "$OUT/run.log" 2>&1
echo "kbv run exit $? after $(( $(date +%s) - start )) s"
tail -25 "$OUT/run.log"
build/kbv export "$OUT/h200-suite.sqlite" --format jsonl --out "$OUT/h200-suite.jsonl" 2>&1 | tail -2
