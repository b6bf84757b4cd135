#!/usr/bin/env bash
# Session 28's device plan (one detached run over calls, bench/device_plan.sh):
#  1. issue 20's GRPO batch at this commit (`bench/serve_grpo.py`, 64 samples, builds made first
#     and untimed), on whatever card comes: session 23's figure (an H100) predates the spare
#     reference workers in the service;
#  2. issue 18's audit resumed from session 27's database on an H100 (75 done at 9331434), or an
#     H200 audit in a database of its own; with e8419b2 (a slow forward's hot figure from its
#     host-inclusive calls: the secondary figures were 28% of session 27's timing runs).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .kbrun; session 27's results:
# gunzip -c docs/results/h100-2026-12-06-s27/audit.sqlite.gz > .kbrun/audit-s27.sqlite):
#   [GRPO=0] setsid nohup docs/results/plan-s28/master.sh TOTAL > /tmp/s28.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s28 570          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s28 TOTAL=${1:-1100}
source bench/device_plan.sh

timeout $(limit 120) python3 -m pytest -q tests/python/test_timing.py > $S/gpu_tests.txt 2>&1
say "tests/python/test_timing.py (its GPU twin included) rc=$?: $(tail -1 $S/gpu_tests.txt)"
if [ "${GRPO:-1}" = 0 ]; then
  say "GRPO not asked for (GRPO=0)"
elif grep -q "kbv serve: built" $S/build.txt; then
  t=$(date +%s)
  timeout $(limit 450) python3 bench/serve_grpo.py --device cuda --samples 64 \
    --workers-per-device 4 --prebuilt --cache-dir $KBV_CACHE_DIR --out $S/grpo.json \
    > $S/grpo.txt 2>&1
  say "GRPO (--prebuilt) rc=$? in $(( $(date +%s) - t )) s: $(tail -4 $S/grpo.txt | tr '\n' ' ')"
else
  say "GRPO skipped, kbv serve not built"
fi
DB=audit-s27
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && DB=audit-s28-h200
[ -f .kbrun/$DB.sqlite ] && cp .kbrun/$DB.sqlite $S/audit.sqlite
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
  --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
  > $S/audit.txt 2>&1
say "kbv audit ($DB) rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/trace.jsonl --top 20 > $S/timeline.txt 2>&1
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
