#!/usr/bin/env bash
# One device call (about 8.5 minutes): issue 4's kbv runs on the benchmark set (cold cache, then
# warm, repetition 1), then issue 7's short steps on the same machine: planted allocations,
# the launch-bound op, and KernelBench's timing method twice on the bundled problems (reusing
# the cold run's builds), for repeatability beside kbv's two runs.
#   SUITE_BUDGET_S (360) MEASURE_BUDGET_S (110) PROFILE (quick) WORKERS (4) SIZE (small)
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root: this one-off lives beside its results
FINAL=${OUT:-results/gpu-call}
mkdir -p "$FINAL"
SIZE=${SIZE:-small}
OUT=$FINAL/suite TIME_BUDGET_S=${SUITE_BUDGET_S:-360} REPS=1 PHASES="kbv-cold kbv-warm" \
  PROFILE=${PROFILE:-quick} WORKERS=${WORKERS:-4} SIZE=$SIZE bash bench/gpu_suite_bench.sh 2>&1 | tail -30
OUT=$FINAL/measure KBV_CACHE_DIR=/tmp/kbv-suite-bench/cache-1 KBV_MEASURE_SIZE=$SIZE \
  KBV_MEASURE_PROBLEMS=all KBV_MEASURE_BUDGET_S=${MEASURE_BUDGET_S:-110} \
  KBV_MEASURE_SKIP="run_a run_b accuracy_headline" bash bench/gpu_measure.sh 2>&1 | tail -30
