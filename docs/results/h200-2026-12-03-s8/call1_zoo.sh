#!/usr/bin/env bash
# Session 8, device call 1 (issue 17, the carve): build kbv from source, the GPU tests of the
# native tracer (split into loader / collector / session / reduction), of timing, guards and the
# GPU zoo, then the whole hack zoo and honest zoo through `kbv eval` (bench/gpu_zoo.sh).
# Run from anywhere; results under $OUT (packed: the device tool returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-results/s8-call1}
mkdir -p "$OUT"
t0=$(date +%s)
git log -1 --format='%H %cd' > "$OUT/commit.txt" 2>/dev/null || true
bash bench/gpu_build.sh "$OUT/build.log" || exit 1
echo "build $(( $(date +%s) - t0 ))s" | tee "$OUT/steps.txt"
PYTHONPATH=build KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build timeout 150 \
  python3 -m pytest -q -p no:cacheprovider tests/python/test_native_memtrace.py \
  tests/python/test_native.py tests/python/test_timing.py tests/python/test_kernel_audit.py \
  tests/python/test_memory.py tests/python/test_guards.py tests/python/test_gpu_zoo.py \
  > "$OUT/gpu_pytest.log" 2>&1
echo "gpu pytest rc=$? $(( $(date +%s) - t0 ))s: $(tail -1 "$OUT/gpu_pytest.log")" | tee -a "$OUT/steps.txt"
OUT=$OUT/zoo ZOO_PHASE1_S=${ZOO_PHASE1_S:-300} ZOO_PHASE2_S=${ZOO_PHASE2_S:-110} \
  bash bench/gpu_zoo.sh > "$OUT/zoo.log" 2>&1
echo "zoo rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$OUT/steps.txt"
cp "$OUT/zoo/zoo_table.md" "$OUT/zoo/gpu-zoo.tgz" "$OUT/" 2>/dev/null
rm -rf "$OUT/zoo"
tail -30 "$OUT/zoo_table.md" 2>/dev/null
