#!/usr/bin/env bash
# Session 29's device plan (one detached run over calls, bench/device_plan.sh): issue 18's audit
# on an H100 resumed from session 27's database (75 of 250 done at 9331434) at this commit, to its
# end: with session 27's first 546 s, the wall of the whole audit on one kind of card, beside
# KernelBench's own 809 s there. On an H200 it runs an H200 audit in a database of its own
# (.kbrun/audit-s29-h200.sqlite, resumed where present: session 29's first 1,059 s).
# At f271ae6: a state's moments and a block's checksums read with one wait; the GPU twins of
# those first.
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .kbrun; session 27's results:
# gunzip -c docs/results/h100-2026-12-06-s27/audit.sqlite.gz > .kbrun/audit-s27.sqlite):
#   setsid nohup docs/results/plan-s29/master.sh TOTAL > /tmp/s29.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s29 570          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s29 TOTAL=${1:-1400}
source bench/device_plan.sh

timeout $(limit 120) python3 -m pytest -q tests/python/test_native_arena.py \
  tests/python/test_families.py -k "checksum or redrawn" > $S/gpu_tests.txt 2>&1
say "GPU twins (checksums, redrawn state) rc=$?: $(tail -1 $S/gpu_tests.txt)"
DB=audit-s27
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && DB=audit-s29-h200
[ -f .kbrun/$DB.sqlite ] && cp .kbrun/$DB.sqlite $S/audit.sqlite
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
  --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
  > $S/audit.txt 2>&1
say "kbv audit ($DB) rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/trace.jsonl --top 20 > $S/timeline.txt 2>&1
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
