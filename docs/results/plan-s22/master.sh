#!/usr/bin/env bash
# Session 22's device plan (one detached run over three calls, bench/device_plan.sh):
#  1. Issue 20's GRPO batch after the serve fix (ee9e2e0): serve against kbv run, 64 samples.
#  2. 31_VisionAttention audited alone on the card, with every GPU process's memory sampled
#     every 0.5 s: on session 21's H100 its reference copy ran out of memory in timing even when
#     evaluated alone (16.9 GB its own, 57 GB held by other processes); which process holds what.
#  3. Issue 18's audit resumed from .kbrun/audit.sqlite (session 21's H100 rows) for the rest.
# Usage: setsid nohup docs/results/plan-s22/master.sh 1100 > /tmp/s22.log 2>&1 < /dev/null &
#        sleep 2; bench/device_collect.sh s22 585       (then twice more, at once after each)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s22 TOTAL=${1:-1100}
source bench/device_plan.sh

# 1. GRPO.
if grep -q "kbv serve: built" $S/build.txt && [ "$(left)" -gt 330 ]; then
  t=$(date +%s)
  timeout $(limit 420) python3 bench/serve_grpo.py --device cuda --samples 64 \
    --workers-per-device 4 --prebuilt --cache-dir $KBV_CACHE_DIR --out $S/grpo.json \
    > $S/grpo.txt 2>&1
  say "GRPO (--prebuilt) rc=$? in $(( $(date +%s) - t )) s"
else
  say "GRPO skipped: kbv serve not built or under 330 s left"
fi

# 2. VisionAttention alone, per-process memory.
mkdir -p $S/va/problems/level3 && cp .kb/level3/31_VisionAttention.py $S/va/problems/level3/
( while true; do ts=$(date +%s.%N)
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null |
      sed "s/^/$ts,/" >> $S/va/apps.csv
    sleep 0.5; done ) &
APPS=$!
( while true; do echo "== $(date +%s.%N)"; ps -eo pid,ppid,rss,args --no-headers | grep -v " ps -eo" |
    grep -E "kbv|python" | cut -c1-200; sleep 2; done ) > $S/va/ps.txt 2>&1 &
PSS=$!
t=$(date +%s)
KBV_TRACE_CALLS=$S/va/trace.jsonl timeout $(limit 120) build/kbv audit --problems $S/va/problems \
  --device cuda --workers-per-device 1 --db $S/va/audit.sqlite --out $S/va/audit.md \
  > $S/va/audit.txt 2>&1
say "VisionAttention alone rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/va/audit.txt)"
kill $APPS $PSS 2>/dev/null

# 3. The audit, resumed, where 200 s are left.
if [ "$(left)" -gt 200 ]; then
  [ -f .kbrun/audit.sqlite ] && cp .kbrun/audit.sqlite $S/audit.sqlite
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
    --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
    > $S/audit.txt 2>&1
  say "kbv audit rc=$? in $(( $(date +%s) - t )) s: $(tail -2 $S/audit.txt | tr '\n' ' ')"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
