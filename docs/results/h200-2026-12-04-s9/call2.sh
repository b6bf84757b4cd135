#!/usr/bin/env bash
# Session 9, device call 2 (H200): after call 1's fixes (blocks drained before they are
# unmapped; the case in use never let go): kbv_native's GPU tests, then `kbv run` over the
# sixteen honest CUDA candidates for KernelBench's largest level-1 problems at their own sizes,
# default draws, with the disk sampled. Resumable: $OUT/kb_run.sqlite is carried into call 3.
# Everything comes back in one tarball ($OUT/call2.tar.gz) besides the database.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/kbv-out}
LOG=/tmp/call2; mkdir -p "$OUT" $LOG
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $LOG/summary.txt; }
finish() { kill ${sampler:-0} 2>/dev/null; tar czf "$OUT/call2.tar.gz" -C /tmp call2; }
trap finish EXIT
bench/gpu_build.sh $LOG/build.log || { say "build failed"; exit 1; }
say "built"
export KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do used=$(df --output=used -B1 / | tail -1); d=$((used - base))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > $LOG/disk_peak_bytes.txt; sleep 0.5; done ) &
sampler=$!

timeout 120 python3 -m pytest -q -rs -x --tb=short tests/python/test_native_arena.py \
  > $LOG/native_arena.txt 2>&1
say "native arena tests rc=$? ($(tail -1 $LOG/native_arena.txt))"

mkdir -p /tmp/kbc/kernelbench && cp -r examples/kernelbench/level1 /tmp/kbc/kernelbench/
[ -f .kbrun/kb_run.sqlite ] && cp .kbrun/kb_run.sqlite "$OUT/kb_run.sqlite"
timeout $(( 560 - ($(date +%s) - t0) )) build/kbv run --problems .kb --candidates /tmp/kbc \
  --device cuda --db "$OUT/kb_run.sqlite" > $LOG/kb_run.txt 2>&1
say "kbv run rc=$?"
say "disk peak $(cat $LOG/disk_peak_bytes.txt) bytes beyond the start"
nvidia-smi --query-gpu=memory.used --format=csv,noheader >> $LOG/summary.txt
