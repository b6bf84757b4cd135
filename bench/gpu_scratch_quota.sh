#!/usr/bin/env bash
# The scratch quota on the GPU machine (docs/architecture.md, "a total-bytes quota on
# scratch/"): an honest CUDA candidate whose extension nvcc builds with TMPDIR in the tmpfs
# scratch must stay correct; the disk filler (examples/wrong/fills_scratch.py) must end as
# runtime_error "scratch quota exceeded" on --device cuda, through the sandbox's tmpfs and,
# with --no-sandbox, through the watchdog. Results:
#   $OUT/<case>.json, $OUT/<case>.log   one kbv.result/1 and kbv's stderr per case
#   $OUT/summary.txt                     verdict, reason and isolation.scratch_quota per case
#   $OUT/gpu-scratch-quota.tgz           all of the above, packed
# Expected runtime on the H200: ~1.5 min to build kbv (skipped when build/kbv exists), ~1-2
# min for the three evaluations (the honest one builds a CUDA extension unless cached).
# DEVICE=cpu runs the same cases on the CPU (the honest CUDA one then cannot build).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-scratch-quota}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-$PWD/.kbv-cache}
if [ ! -x build/kbv ] || [ "${REBUILD:-0}" = 1 ]; then
  bash bench/gpu_build.sh "$OUT/build.log" || exit 1
fi

run_case() {  # name quota_bytes problem candidate [extra kbv args]
  local name=$1 quota=$2 problem=$3 candidate=$4
  shift 4
  local t0=$(date +%s)
  KBV_SCRATCH_QUOTA_BYTES=$quota timeout 280 build/kbv eval --problem "problems/$problem.py" \
    --candidate "$candidate" --device "${DEVICE:-cuda}" --draws 2 --samples 10 --rounds 2 --quiet \
    --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(( $(date +%s) - t0 ))s" >> "$OUT/summary.txt"
  python3 - "$OUT/$name.json" >> "$OUT/summary.txt" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("verdict:", r["verdict"], "|", r["reason"])
print("namespaces:", r["isolation"].get("namespaces"))
print("scratch_quota:", json.dumps(r["isolation"].get("scratch_quota")))
PY
}

: > "$OUT/summary.txt"
run_case honest_cuda_tmpfs $((4 << 30)) level1/6_Sum_reduction_over_a_dimension \
  examples/honest/cuda/atomic_sum_reduction.py
run_case filler_tmpfs $((256 << 20)) level1/3_ReLU examples/wrong/fills_scratch.py
run_case filler_watchdog $((256 << 20)) level1/3_ReLU examples/wrong/fills_scratch.py --no-sandbox
cat "$OUT/summary.txt"
tar czf "$OUT/gpu-scratch-quota.tgz" -C "$OUT" --exclude='*.tgz' .
