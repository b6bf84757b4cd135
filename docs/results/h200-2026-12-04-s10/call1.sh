#!/usr/bin/env bash
# Session 10, device call 1 (H200): kbv_native's GPU tests (the relaxed `scale` comparison);
# `kbv audit` over a sample of eleven KernelBench problems with every worker call traced
# (KBV_TRACE_CALLS: where an audited problem's time goes, call by call, and each drawn case's
# phases); then KernelBench's own eager baseline timing (pydantic carried as wheels) over levels
# 1-3 for what the call's time allows (it resumes). One tarball back.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/kbv-out}
LOG=/tmp/call1; mkdir -p "$OUT" $LOG
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $LOG/summary.txt; }
finish() { kill ${sampler:-0} 2>/dev/null; tar czf "$OUT/call1.tar.gz" -C /tmp call1; }
trap finish EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl > $LOG/pip.txt 2>&1
say "wheels rc=$?"
bench/gpu_build.sh $LOG/build.log || { say "build failed"; exit 1; }
say "built"
export KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do used=$(df --output=used -B1 / | tail -1); d=$((used - base))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > $LOG/disk_peak_bytes.txt; sleep 0.5; done ) &
sampler=$!
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $LOG/gpu.csv 2>&1

timeout 90 python3 -m pytest -q -rs --tb=short tests/python/test_native_arena.py \
  > $LOG/native_arena.txt 2>&1
say "native arena tests rc=$? ($(tail -1 $LOG/native_arena.txt))"

S=/tmp/sample; mkdir -p $S/level1 $S/level2 $S/level3
for p in level1/19_ReLU level1/45_Average_Pooling_2D level1/1_Square_matrix_multiplication_ \
         level1/54_conv_standard_3D__square_input__square_kernel level2/1_Conv2D_ReLU_BiasAdd \
         level2/59_Matmul_Swish_Scaling level2/100_ConvTranspose3d_Clamp_Min_Divide \
         level3/1_MLP level3/11_VGG16 level3/28_VisionTransformer level3/35_LSTM; do
  cp .kb/$p.py $S/$p.py 2>/dev/null || say "missing $p"
done
a0=$(date +%s)
KBV_TRACE_CALLS=$LOG/trace.jsonl timeout 200 build/kbv audit --problems $S --device cuda \
  --db $LOG/sample_audit.sqlite --out $LOG/sample_audit.md > $LOG/sample_audit.txt 2>&1
say "sample audit rc=$? in $(( $(date +%s) - a0 )) s"

b0=$(date +%s)
PYTHONPATH=/tmp/site KBV_KERNELBENCH=.kb timeout $(( 585 - ($(date +%s) - t0) )) \
  python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out $LOG/kb_baseline.jsonl \
  > $LOG/kb_baseline.txt 2>&1
say "KernelBench baseline timing rc=$? in $(( $(date +%s) - b0 )) s for $(wc -l < $LOG/kb_baseline.jsonl) problems"
say "disk peak $(cat $LOG/disk_peak_bytes.txt) bytes beyond the start"
