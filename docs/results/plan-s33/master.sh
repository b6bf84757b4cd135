#!/usr/bin/env bash
# Session 33's device plan for one short call (720 s of device time were left after six refused
# or lost starts): on an H100 session 31's audit database (9 of 250 left, the problems that need
# the device alone and one retry) to its end, then the hack zoo's CUDA files; on an H200 the zoo's
# CUDA files first (not run on a GPU since session 24, on an H100; on an H200 not since session
# 10), then session 29's H200 audit resumed with what is left (116 of 250 left).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl):
#   setsid nohup docs/results/plan-s33/master.sh TOTAL > /tmp/s33.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s33 WAIT
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s33 TOTAL=${1:-500}
source bench/device_plan.sh

H200=0
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
SEED=$([ $H200 = 1 ] && echo h200-2026-12-06-s29 || echo h100-2026-12-07-s31)
[ -f $S/audit.sqlite ] || gunzip -c docs/results/$SEED/audit.sqlite.gz > $S/audit.sqlite

audit() {
  local t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $(( $(left) - ${1:-0} ))) build/kbv audit \
    --problems .kb --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
    > $S/audit.txt 2>&1
  say "kbv audit ($SEED) rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
}
zoo() {
  local t=$(date +%s)
  OUT=$S/zoo ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 250) ZOO_PHASE2_S=100 \
    timeout $(limit 370) bench/gpu_zoo.sh > $S/zoo.txt 2>&1
  say "zoo, CUDA files, rc=$? in $(( $(date +%s) - t )) s: $(grep -E 'detect|false' $S/zoo/zoo_table.md | head -3 | tr '\n' ' ')"
}
if [ $H200 = 1 ]; then
  zoo
  [ "$(left)" -gt 60 ] && audit 10
else
  audit ${AUDIT_RESERVE:-250}  # the 9 left take about 200 s; the zoo the rest (AUDIT_RESERVE=0: none)
  [ "$(left)" -gt 120 ] && zoo
fi
python3 bench/trace_timeline.py $S/trace.jsonl --top 20 > $S/timeline.txt 2>&1
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
