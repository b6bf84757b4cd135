#!/usr/bin/env bash
# Session 24's device plan (one detached run over two or three calls, bench/device_plan.sh):
#  1. The GPU twins of the reference's own-memory tests.
#  2. The four KernelBench problems whose reference copy ran out of memory alone on session 23's
#     H100 (38_L1Norm_, 39_L2Norm_, 45_Average_Pooling_2D, 2_ShallowWideMLP), audited one at a
#     time after c16f530 (re-checks keep one case and one copy beside the one in use; the
#     reference lets its float64 model go when its cases were not enough).
#  3. Issue 18's audit resumed from .kbrun/audit.sqlite (session 23's H100 rows: 142 of 250) for
#     the rest, every worker call traced.
# Usage (carry .kb .deps .kbrun):
#   setsid nohup docs/results/plan-s24/master.sh 1140 > /tmp/s24.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s24 585          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s24 TOTAL=${1:-1140}
source bench/device_plan.sh

t=$(date +%s)
timeout $(limit 90) python3 -m pytest -q -p no:cacheprovider tests/python/test_memory_cap.py \
  > $S/tests.txt 2>&1
say "GPU memory tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

mkdir -p $S/four/problems/level1 $S/four/problems/level3
cp .kb/level1/{38_L1Norm_,39_L2Norm_,45_Average_Pooling_2D}.py $S/four/problems/level1/
cp .kb/level3/2_ShallowWideMLP.py $S/four/problems/level3/
( while true; do ts=$(date +%s.%N)
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null |
      sed "s/^/$ts,/" >> $S/four/apps.csv
    sleep 0.5; done ) &
APPS=$!
t=$(date +%s)
KBV_TRACE_CALLS=$S/four/trace.jsonl timeout $(limit 420) build/kbv audit \
  --problems $S/four/problems --device cuda --workers-per-device 1 --db $S/four/audit.sqlite \
  --out $S/four/audit.md > $S/four/audit.txt 2>&1
say "the four, one at a time, rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/four/audit.txt)"
kill $APPS 2>/dev/null

if [ "$(left)" -gt 120 ]; then
  [ -f .kbrun/audit.sqlite ] && cp .kbrun/audit.sqlite $S/audit.sqlite
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
    --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
    > $S/audit.txt 2>&1
  say "kbv audit rc=$? in $(( $(date +%s) - t )) s: $(tail -2 $S/audit.txt | tr '\n' ' ')"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
