#!/usr/bin/env bash
# Session 27's device plan (one detached run over three calls, bench/device_plan.sh): issue 18's
# full audit finished from session 26's database (201 of 250 stored; the 49 left include the 24
# problems that need the device's memory to itself, put after the others), each device thread
# awaiting a task's problem load before placing it (session 26's 9 mid-run drains), loads and
# scans outside the device's gate (223 + 36 s of timing runs' waits in session 26); then the
# hack zoo and the honest zoo on the GPU (last run in session 24: 61/61, 0/23) with what is left.
# Resumable: .kbrun/audit-s26.sqlite, else the committed copy in h100-2026-12-06-s26/; the wall of
# this part adds to session 26's 1,599 s. Every worker call traced; the GPU's use sampled.
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps, and .kbrun if it holds one):
#   setsid nohup docs/results/plan-s27/master.sh 1650 > /tmp/s27.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s27 585          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s27 TOTAL=${1:-1650}
source bench/device_plan.sh

if [ -f .kbrun/audit-s26.sqlite ]; then cp .kbrun/audit-s26.sqlite $S/audit.sqlite
else gunzip -c docs/results/h100-2026-12-06-s26/audit.sqlite.gz > $S/audit.sqlite; fi
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit 1150) build/kbv audit --problems .kb \
  --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
  > $S/audit.txt 2>&1
say "kbv audit rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/trace.jsonl > $S/timeline.txt 2>&1
if [ "$(left)" -gt 200 ]; then
  t=$(date +%s)
  OUT=$S/zoo ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 250) ZOO_PHASE2_S=110 \
    timeout $(limit 400) bench/gpu_zoo.sh > $S/zoo.txt 2>&1
  say "zoo (CUDA files) rc=$? in $(( $(date +%s) - t )) s"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
