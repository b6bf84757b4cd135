#!/usr/bin/env bash
# The device plan session 19 left for the next session (session 18's plan, which ran in session
# 19 on an H100, narrowed to what that run left owed). Started detached by the first call, it
# runs its steps one after another with their own limits in /tmp/s19 (kept while the machine
# stays warm); each call runs collect.sh, which waits and packs /tmp/s19 into $OUT. Usage (from
# the repository root, after `bash scripts/stage_deps.sh` here: kbv serve needs the staged
# cpp-httplib):
#   setsid nohup docs/results/h100-2026-12-05-s19/plan/master.sh TOTAL_S > /tmp/s19.log 2>&1 &
# Steps: build (stops if kbv serve is not built); the GPU test session 19 saw fail (fixed since);
# issue 20's GRPO batch (never run yet); the CUDA half of the zoo plus the new CPU twin (three
# files missed in session 19, fixed since); the GPU flip count resumed from session 19's 91
# evaluations to 10 runs; then the heavy KernelBench problems under protocol 3 for what is left.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
TOTAL=${1:-1300}
S=/tmp/s19; mkdir -p $S
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
timeout $(limit ${TESTS_S:-90}) python3 -m pytest -q -p no:cacheprovider \
  tests/python/test_deferred_sensitivity.py > $S/tests.txt 2>&1
say "GPU tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

if grep -q "kbv serve: built" $S/build.txt; then
  t=$(date +%s)
  timeout $(limit ${GRPO_S:-420}) python3 bench/serve_grpo.py --device cuda --samples 64 \
    --workers-per-device 4 --cold --cache-dir $KBV_CACHE_DIR --out $S/grpo.json > $S/grpo.txt 2>&1
  say "GRPO rc=$? in $(( $(date +%s) - t )) s"
else
  say "GRPO skipped: kbv serve was not built"
fi

t=$(date +%s)
OUT=$S/zoo-cuda ZOO_ONLY='^(hacks|honest)/cuda/|^hacks/t5_kept' ZOO_PHASE1_S=$(limit 300) \
  ZOO_PHASE2_S=150 timeout $(limit 470) bench/gpu_zoo.sh > $S/zoo-cuda.txt 2>&1
say "zoo (CUDA files + the CPU twin) rc=$? in $(( $(date +%s) - t )) s: $(grep -E '^\| .*\*\*NO\*\*' $S/zoo-cuda/zoo_table.md 2>/dev/null | grep -v 'no result' | cut -d'|' -f2,6 | tr '\n' ' ')"

t=$(date +%s)
mkdir -p $S/flips-cuda
[ -f $S/flips-cuda/runs.jsonl ] || cp docs/results/h100-2026-12-05-s19/flips-cuda/runs.jsonl $S/flips-cuda/
timeout $(limit ${FLIPS_S:-420}) python3 bench/flip_count.py --runs 10 --device cuda \
  --out $S/flips-cuda --only 'honest/|candidates/' --jobs 8 > $S/flips.txt 2>&1
say "flip count rc=$? in $(( $(date +%s) - t )) s: $(wc -l < $S/flips-cuda/runs.jsonl) evaluations; $(tail -1 $S/flips.txt)"

if [ "$(left)" -gt 90 ]; then
  first=/tmp/s19-first; rm -rf $first
  for f in $(cd .kb && ls level*/*.py | grep -E '^level1/(19|27|31|30|63|67|68|77|87)_|^level2/(7|79|81|84|89|91|93|94|95|99|9)_|^level3/(35|44)_'); do
    mkdir -p $first/$(dirname $f) && cp .kb/$f $first/$f
  done
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace_first.jsonl timeout $(limit 900) build/kbv audit --problems $first \
    --device cuda --workers-per-device 6 --db $S/audit.sqlite --out $S/audit_first.md \
    > $S/audit_first.txt 2>&1
  say "kbv audit of $(ls $first/level*/*.py | wc -l) heavy problems: rc=$? in $(( $(date +%s) - t )) s"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
