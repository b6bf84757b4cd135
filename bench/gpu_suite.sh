#!/usr/bin/env bash
# The GPU run of the bundled suite (docs/results/): build kbv from source on the GPU machine,
# then evaluate every honest CUDA candidate at KernelBench-like sizes.
#   bench/gpu_suite.sh build     configure and build ./build (no tests), check kbv_native
#   bench/gpu_suite.sh correct   correctness pass, 7 evaluations at once (also fills the build cache)
#   bench/gpu_suite.sh time      the timed pass, one evaluation at a time
#   bench/gpu_suite.sh zoo       the CUDA-only broken candidates (illegal address, GPU hang)
# Results go to $OUT (the device tool's output folder) or ./results/gpu.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KBV_CACHE_DIR=$PWD/.kbv-cache
for step in "$@"; do
  case "$step" in
    build)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit \
        --format=csv > "$OUT/gpu.csv"
      bash bench/gpu_build.sh "$OUT/build.log" || exit 1
      python3 -c "import torch, sys; sys.path.insert(0, 'build'); import kbv_native; print('kbv_native cuda', kbv_native.has_cuda, torch.cuda.get_device_name())"
      ;;
    correct)
      scripts/eval_suite.sh --device cuda --size large --out "$OUT/correct" --jobs 7 -- --no-timing --draws 2
      ;;
    time)
      scripts/eval_suite.sh --device cuda --size large --out "$OUT/suite" -- --draws 2 --samples 30 --rounds 3
      ;;
    zoo)
      for f in examples/wrong_cuda/*.py; do
        build/kbv eval -p problems/level1/3_ReLU.py -c "$f" --device cuda --timeout 20 --quiet \
          --json "$OUT/zoo_$(basename "${f%.py}").json" 2>&1 | head -1 | sed "s|^|$f: |"
      done
      ;;
  esac
done
