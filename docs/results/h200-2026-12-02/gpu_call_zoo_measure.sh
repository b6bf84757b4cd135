#!/usr/bin/env bash
# One device call: the hack zoo on the H200 (issue 3, bench/gpu_zoo.sh), then the measurement
# engine's memory and accuracy benchmarks (issue 7, bench/gpu_measure.sh without its
# repeatability runs, which go with the suite benchmark). Everything is packed into
# $OUT/call.tgz.
#   Run: docs/results/h200-2026-12-02/gpu_call_zoo_measure.sh  (device tool, carry .deps)
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root: this one-off lives beside its results
export OUT=${OUT:-results/gpu-call}
mkdir -p "$OUT"
RES=results/call && rm -rf "$RES" && mkdir -p "$RES"
OUT=$RES bench/gpu_probe.sh > /dev/null
t0=$(date +%s)
bash bench/gpu_build.sh "$RES/build.log" || exit 1
echo "build $(( $(date +%s) - t0 )) s"
OUT=$RES/zoo ZOO_PHASE1_S=${ZOO_PHASE1_S:-250} ZOO_PHASE2_S=${ZOO_PHASE2_S:-90} \
  bench/gpu_zoo.sh > "$RES/zoo.log" 2>&1
echo "zoo exit $? at $(( $(date +%s) - t0 )) s"; tail -8 "$RES/zoo.log"
OUT=$RES/measure KBV_MEASURE_BUDGET_S=${KBV_MEASURE_BUDGET_S:-110} \
  KBV_MEASURE_SKIP="run_a kernelbench_1 run_b kernelbench_2" bench/gpu_measure.sh > "$RES/measure.log" 2>&1
echo "measure exit $? at $(( $(date +%s) - t0 )) s"; tail -30 "$RES/measure.log"
rm -f "$RES"/zoo/gpu-zoo.tgz
tar czf "$OUT/call.tgz" -C results call
