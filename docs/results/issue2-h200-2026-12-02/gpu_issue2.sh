#!/usr/bin/env bash
# The whole GPU run behind docs/results/issue2-suite-h200.md, in one device call: build, the CUDA
# zoo next to a parallel correctness pass (which fills the build cache), then the timed pass.
# Everything is packed into $OUT/results.tgz (the device tool returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root: this one-off lives beside its results
export OUT=${OUT:-results/gpu}
RES=results/gpu
mkdir -p "$RES"
date -u +%FT%TZ > "$RES/started.txt"
pack() { tar czf "$OUT/results.tgz" -C results gpu; }
trap pack EXIT
timeout "${KBV_GPU_BUDGET:-540}" bash -c '
  OUT=results/gpu bench/gpu_suite.sh build || exit 1
  OUT=results/gpu bench/gpu_suite.sh zoo > results/gpu/zoo.txt 2>&1 &
  OUT=results/gpu bench/gpu_suite.sh correct
  wait
  cat results/gpu/zoo.txt
  OUT=results/gpu bench/gpu_suite.sh time
'
echo "exit $?"
