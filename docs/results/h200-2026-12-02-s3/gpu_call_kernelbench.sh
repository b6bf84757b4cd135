#!/usr/bin/env bash
# One device call: the planted-allocation check of the memory tracer (a few seconds), then
# KernelBench's own evaluation of the suite benchmark's set (repetition 1) under what is left of
# KB_BUDGET_S; the kbv runs of the same set ran in an earlier call (gpu_call_suite_measure.sh).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root: this one-off lives beside its results
FINAL=${OUT:-results/gpu-call}
mkdir -p "$FINAL"
OUT=$FINAL/measure KBV_MEASURE_BUDGET_S=30 \
  KBV_MEASURE_SKIP="accuracy_launch run_a kernelbench_1 run_b kernelbench_2 accuracy_headline" \
  bash bench/gpu_measure.sh 2>&1 | tail -12
OUT=$FINAL/suite TIME_BUDGET_S=${KB_BUDGET_S:-500} REPS=1 PHASES=kernelbench \
  bash bench/gpu_suite_bench.sh 2>&1 | tail -30
