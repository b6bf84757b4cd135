#!/usr/bin/env bash
# Session 9, device call 1 (H200): the case path (issue 18) on the GPU. Run from the repository
# root with .deps (scripts/stage_deps.sh) and .kb (KernelBench 423217d: level1-3, src, scripts)
# carried. Writes everything under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/kbv-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$OUT/summary.txt"; }
bench/gpu_build.sh "$OUT/build.log" || { say "build failed"; exit 1; }
say "built"
export KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$OUT/summary.txt"
df -B1 / /tmp >> "$OUT/summary.txt"

# Disk used beyond what was used at the start, sampled twice a second: the evaluations' disk
# (their logs, the build cache) whatever the problems' sizes.
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do used=$(df --output=used -B1 / | tail -1); d=$((used - base))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > "$OUT/disk_peak_bytes.txt"; sleep 0.5; done ) &
sampler=$!

# 1. kbv_native on the device: arenas across processes, the device pass against the host pass.
timeout 150 python3 -m pytest -q -rs tests/python/test_native_arena.py > "$OUT/native_arena.txt" 2>&1
say "native arena tests rc=$? ($(tail -1 "$OUT/native_arena.txt"))"

# 2. Bundled honest CUDA candidates at large size, through the sandbox (VMM descriptors into the
#    candidate's PID namespace).
for p in 3_ReLU 4_Softmax 1_Square_matrix_multiplication; do
  timeout 240 build/kbv eval --problem problems/level1/$p.py \
    --candidate examples/candidates/cuda/level1/$p.py --device cuda --size large \
    --profile quick --quiet --json "$OUT/eval_$p.json" > "$OUT/eval_$p.txt" 2>&1
  say "eval $p rc=$? $(head -1 "$OUT/eval_$p.txt")"
done

# 3. kbv audit over KernelBench's largest level-1 problems at their own sizes (one draw a family
#    here: this call proves they fit; the full audit is call 2).
sub=/tmp/kbsub
mkdir -p $sub/level1
for p in 45_Average_Pooling_2D 38_L1Norm_ 19_ReLU 23_Softmax 1_Square_matrix_multiplication_; do
  cp .kb/level1/$p.py $sub/level1/
done
timeout $(( 560 - ($(date +%s) - t0) )) build/kbv audit --problems $sub --device cuda --draws 1 \
  --profile quick --db "$OUT/audit1.sqlite" --out "$OUT/audit1.md" > "$OUT/audit1.txt" 2>&1
say "audit rc=$?"
kill $sampler
say "disk peak $(cat "$OUT/disk_peak_bytes.txt") bytes"
