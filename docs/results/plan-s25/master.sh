#!/usr/bin/env bash
# Session 25's device plan (one detached run over three calls, bench/device_plan.sh), written in
# session 24 for the changes that session made on the CPU only:
#  1. The GPU twins of the reference's memory tests, with the new ones (the model moved out and
#     back by the third step of room, _compact; the segment kind a fault's account names).
#  2. The four problems that ran out of memory alone on session 23's H100, one at a time
#     (session 24: three passed; 2_ShallowWideMLP ran out with 40 GiB free in torch's fixed
#     segments, now met by _compact). With every GPU process's memory sampled: a spare reference worker should
#     take no device memory before its first command.
#  3. A slice of 40 problems audited afresh (spares on, the default on a GPU; every call traced,
#     the loads' steps in the trace): compare each problem's time with session 24's rows in
#     docs/results/h100-2026-12-06-s24/audit/audit.sqlite.gz and read `load_phases_s`.
#  4. KernelBench's own baseline timing on the same card with what is left, resumable from
#     .kbrun/kb_baseline.jsonl (pydantic's wheels carried in .whl).
# Usage (carry .kb .deps .whl, and .kbrun if it holds kb_baseline.jsonl):
#   setsid nohup docs/results/plan-s25/master.sh 1650 > /tmp/s25.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s25 585          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s25 TOTAL=${1:-1650}
source bench/device_plan.sh

t=$(date +%s)
timeout $(limit 90) python3 -m pytest -q -p no:cacheprovider tests/python/test_memory_cap.py \
  > $S/tests.txt 2>&1
say "GPU memory tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

( while true; do ts=$(date +%s.%N)
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null |
      sed "s/^/$ts,/" >> $S/apps.csv
    ps -eo pid,args --no-headers | grep "kbv.worker" | grep -v grep | sed "s/^/$ts /" >> $S/workers.txt
    sleep 1; done ) &
APPS=$!

mkdir -p $S/four/problems/level1 $S/four/problems/level3
cp .kb/level1/{38_L1Norm_,39_L2Norm_,45_Average_Pooling_2D}.py $S/four/problems/level1/
cp .kb/level3/2_ShallowWideMLP.py $S/four/problems/level3/
t=$(date +%s)
KBV_TRACE_CALLS=$S/four/trace.jsonl timeout $(limit 300) build/kbv audit \
  --problems $S/four/problems --device cuda --workers-per-device 1 --db $S/four/audit.sqlite \
  --out $S/four/audit.md > $S/four/audit.txt 2>&1
say "the four, one at a time, rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/four/audit.txt)"

# The slice: problems 1-14 of level 1, 1-14 of level 2, 1-12 of level 3 (sizes from 0.1 to 17 GB).
for l in 1 2 3; do
  mkdir -p $S/slice/problems/level$l
  n=$([ $l = 3 ] && echo 12 || echo 14)
  for i in $(seq 1 $n); do cp .kb/level$l/${i}_*.py $S/slice/problems/level$l/; done
done
t=$(date +%s)
KBV_TRACE_CALLS=$S/slice/trace.jsonl timeout $(limit 520) build/kbv audit \
  --problems $S/slice/problems --device cuda --workers-per-device 4 --db $S/slice/audit.sqlite \
  --out $S/slice/audit.md > $S/slice/audit.txt 2>&1
say "the slice (40) rc=$? in $(( $(date +%s) - t )) s: $(tail -2 $S/slice/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/slice/trace.jsonl > $S/slice/timeline.txt 2>&1
kill $APPS 2>/dev/null

if [ "$(left)" -gt 120 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > $S/pip.txt 2>&1
  [ -f .kbrun/kb_baseline.jsonl ] && cp .kbrun/kb_baseline.jsonl $S/kb_baseline.jsonl
  t=$(date +%s)
  PYTHONPATH=/tmp/site KBV_KERNELBENCH=.kb timeout $(limit $TOTAL) \
    python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out $S/kb_baseline.jsonl \
    > $S/kb_baseline.txt 2>&1
  say "KernelBench baseline rc=$? in $(( $(date +%s) - t )) s; $(wc -l < $S/kb_baseline.jsonl) problems in all"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
