#!/usr/bin/env bash
# Session 18's device work (session 17's plan, which never ran, moved here from
# h200-2026-12-05-s17/; the audit's sample gains four
# 6 GB elementwise problems, whose plans the sensitivity reserved apart changes, and 35_LSTM) as one plan that outlives the device calls: started detached
# (setsid) by the first call, it runs the steps below one after another with their own time
# limits, in /tmp/s18 (kept while the machine stays warm between calls); each call then runs
# collect.sh, which waits and packs /tmp/s18 into $OUT. Usage (from the repository root):
#   setsid nohup docs/results/h200-2026-12-05-s18/master.sh TOTAL_S > /tmp/s18.log 2>&1 &
# Steps, in order of what the open issues need most: build; the GPU tests (issues 18, 19);
# issue 20's GRPO batch (cold: each side pays for its own builds); the CUDA half of the zoo;
# the GPU flip count (honest files x 10 runs, resumable); the rest of the zoo; then the
# heaviest KernelBench problems audited under protocol 3, for whatever time is left.
set -uo pipefail
cd "$(dirname "$0")/../../.."
TOTAL=${1:-1500}
S=/tmp/s18; mkdir -p $S
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
bench/gpu_build.sh $S/build.log || { say "build failed"; touch $S/DONE; exit 1; }
say "built"

t=$(date +%s)
timeout $(limit ${TESTS_S:-150}) python3 -m pytest -q -p no:cacheprovider \
  tests/python/test_native_arena.py tests/python/test_deferred_sensitivity.py \
  tests/python/test_memory_cap.py tests/python/test_float64_truth.py > $S/tests.txt 2>&1
say "GPU tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

t=$(date +%s)
timeout $(limit ${GRPO_S:-420}) python3 bench/serve_grpo.py --device cuda --samples 64 \
  --workers-per-device 4 --cold --cache-dir $KBV_CACHE_DIR --out $S/grpo.json > $S/grpo.txt 2>&1
say "GRPO rc=$? in $(( $(date +%s) - t )) s"

t=$(date +%s)
timeout $(limit ${FLIPS_S:-360}) python3 bench/flip_count.py --runs 10 --device cuda \
  --out $S/flips-cuda --only 'honest/|candidates/' --jobs 8 > $S/flips.txt 2>&1
say "flip count rc=$? in $(( $(date +%s) - t )) s: $(wc -l < $S/flips-cuda/runs.jsonl) evaluations; $(tail -3 $S/flips.txt | head -1)"

t=$(date +%s)
OUT=$S/zoo-cuda ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 300) ZOO_PHASE2_S=120 \
  timeout $(limit 440) bench/gpu_zoo.sh > $S/zoo-cuda.txt 2>&1
say "zoo (CUDA files) rc=$? in $(( $(date +%s) - t )) s: $(grep -iE 'detect|false' $S/zoo-cuda/zoo_table.md 2>/dev/null | tr '\n' ' ')"

if [ "$(left)" -gt 120 ]; then
  t=$(date +%s)
  OUT=$S/zoo-rest ZOO_ONLY='^(hacks|honest)/[a-bd-z]' ZOO_PHASE1_S=$(limit 300) ZOO_PHASE2_S=$(limit 120) \
    timeout $(limit 440) bench/gpu_zoo.sh > $S/zoo-rest.txt 2>&1
  say "zoo (the rest) rc=$? in $(( $(date +%s) - t )) s"
fi

if [ "$(left)" -gt 90 ]; then
  first=/tmp/s18-first; rm -rf $first
  for f in $(cd .kb && ls level*/*.py | grep -E '^level1/(19|27|31|30|63|67|68|77|87)_|^level2/(7|79|81|84|89|91|93|94|95|99|9)_|^level3/(35|44)_'); do
    mkdir -p $first/$(dirname $f) && cp .kb/$f $first/$f
  done
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace_first.jsonl timeout $(limit 900) build/kbv audit --problems $first \
    --device cuda --workers-per-device 6 --db $S/audit.sqlite --out $S/audit_first.md \
    > $S/audit_first.txt 2>&1
  say "kbv audit of $(ls $first/level*/*.py | wc -l) heavy problems: rc=$? in $(( $(date +%s) - t )) s"
  build/kbv audit --table-only --db $S/audit.sqlite --problems $first --format csv \
    --out $S/audit_first.csv > /dev/null 2>&1
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
