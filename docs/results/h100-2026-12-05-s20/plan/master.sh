#!/usr/bin/env bash
# The device plan session 20 left for the next session: what protocol version 4 (the normwise
# sensitivity term, eight normal sensitivity runs) owes on a GPU, and issue 20's GRPO figures.
# Started detached by the first call, it runs its steps one after another with their own limits
# in /tmp/s21 (kept while the machine stays warm; every call runs collect.sh, which waits and
# packs /tmp/s21 into $OUT, so send each call at once: the machine goes back 30 s after one).
# Usage (from the repository root, after `bash scripts/stage_deps.sh` here):
#   setsid nohup docs/results/h100-2026-12-05-s20/plan/master.sh TOTAL_S > /tmp/s21.log 2>&1 &
# Steps, issue 19 first (both close it on a GPU): build; the GPU twins of the sensitivity tests;
# the GPU flip count under version 4 from zero (10 runs of the 19 honest CUDA files: about 750 s
# at 8 jobs on the H100, resumable from $S/flips-cuda/runs.jsonl); the zoo's CUDA files under
# version 4; then, with what is left (and kbv serve built), issue 20's GRPO batch with every
# build made first (--prebuilt: the evaluation's throughput, serve against kbv run).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
TOTAL=${1:-1300}
S=/tmp/s21; mkdir -p $S
export PYTHONUNBUFFERED=1 KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
mkdir -p $KBV_CACHE_DIR
t0=$(date +%s)
left() { echo $(( TOTAL - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $S/summary.txt; }
limit() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; echo $want; }
nvidia-smi > $S/nvidia-smi.txt 2>&1
( while true; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader \
    >> $S/gpu_samples.csv 2>/dev/null; sleep 2; done ) &
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do d=$(( $(df --output=used -B1 / | tail -1) - base ))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > $S/disk_peak_bytes.txt; sleep 1; done ) &
git log -1 --format='%H %s' > $S/commit.txt 2>/dev/null
bench/gpu_build.sh $S/build.log > $S/build.txt || { say "build failed"; touch $S/DONE; exit 1; }
say "built; $(tail -1 $S/build.txt)"

t=$(date +%s)
timeout $(limit ${TESTS_S:-120}) python3 -m pytest -q -p no:cacheprovider \
  tests/python/test_deferred_sensitivity.py tests/python/test_elementwise_budget.py \
  > $S/tests.txt 2>&1
say "GPU tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

t=$(date +%s)
mkdir -p $S/flips-cuda
timeout $(limit ${FLIPS_S:-760}) python3 bench/flip_count.py --runs 10 --device cuda \
  --out $S/flips-cuda --only 'honest/|candidates/' --jobs 8 > $S/flips.txt 2>&1
say "flip count (v4) rc=$? in $(( $(date +%s) - t )) s: $(wc -l < $S/flips-cuda/runs.jsonl) evaluations; $(tail -1 $S/flips.txt)"

if [ "$(left)" -gt 120 ]; then
  t=$(date +%s)
  OUT=$S/zoo-cuda ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 300) \
    ZOO_PHASE2_S=150 timeout $(limit 470) bench/gpu_zoo.sh > $S/zoo-cuda.txt 2>&1
  say "zoo (CUDA files, v4) rc=$? in $(( $(date +%s) - t )) s"
fi
if grep -q "kbv serve: built" $S/build.txt && [ "$(left)" -gt 240 ]; then
  t=$(date +%s)
  timeout $(limit ${GRPO_S:-420}) python3 bench/serve_grpo.py --device cuda --samples 64 \
    --workers-per-device 4 --prebuilt --cache-dir $KBV_CACHE_DIR --out $S/grpo.json \
    > $S/grpo.txt 2>&1
  say "GRPO (--prebuilt) rc=$? in $(( $(date +%s) - t )) s"
else
  say "GRPO skipped: kbv serve not built or under 240 s left"
fi

say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
