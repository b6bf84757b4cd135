#!/usr/bin/env bash
# Session 26's device plan (one detached run over three calls, bench/device_plan.sh): issue 18's
# full audit afresh, all 250 problems of KernelBench 423217d levels 1-3, on the card session 25
# timed KernelBench's own baseline on (an H100: 809 s for the 250; the goal is at most twice
# that), with what session 25 changed on the CPU only:
#  - a device thread puts back a task whose problem needs the device's memory to itself while
#    other tasks are open, so such evaluations come last behind one drain ("N tasks needing the
#    device's memory to itself evaluated after the others" at the end of audit.txt);
#  - an evaluation's waits (the gate, the memory ledger, a session started ahead) in the trace:
#    timeline.txt splits the time with no call in flight by the waits then;
#  - a reference worker warms the meta device up at its start; a block the driver cannot make
#    is tried again with torch's cache emptied (both seen working in session 25's second plan).
# Resumable: a database in .kbrun/audit-s26.sqlite is carried on (the wall of each part adds
# up); without one the audit starts afresh. Every worker call traced; the GPU's use sampled.
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps, and .kbrun if it holds one):
#   setsid nohup docs/results/plan-s26/master.sh 1650 > /tmp/s26.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s26 585          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s26 TOTAL=${1:-1650}
source bench/device_plan.sh

[ -f .kbrun/audit-s26.sqlite ] && cp .kbrun/audit-s26.sqlite $S/audit.sqlite
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
  --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
  > $S/audit.txt 2>&1
say "kbv audit rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/trace.jsonl > $S/timeline.txt 2>&1
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
