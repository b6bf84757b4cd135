#!/usr/bin/env bash
# Session 27's device plan (one detached run over three calls, bench/device_plan.sh): issue 18's
# full audit afresh, all 250 problems of KernelBench 423217d levels 1-3, on the card session 25
# timed KernelBench's own baseline on (an H100: 809 s; the goal is at most twice that), with
# what session 26 changed on the CPU only:
#  - each device thread awaits a task's problem load before placing it (`wait_load` in the
#    trace), so every problem that needs the device's memory to itself goes after the others
#    (session 26: 9 of them drained the device mid-run, 435 s of waiting);
#  - a session started ahead loads outside the device's gate and reads the device after it
#    (`device_facts`), and the static scan goes outside the gate (session 26: timing runs waited
#    223 s for loads in flight and 36 s for scans, everything else held back behind them).
# Then, if the audit is done with time left, the GPU zoo's CUDA files (last run in session 24).
# Resumable: a database in .kbrun/audit-s27.sqlite is carried on (the wall of each part adds up).
# Session 26's partial audit (201 of 250 at 90edd44) is in h100-2026-12-06-s26/audit.sqlite.gz.
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .kbrun; session 27 left 75
# results: gunzip -c docs/results/h100-2026-12-06-s27/audit.sqlite.gz > .kbrun/audit-s27.sqlite):
#   setsid nohup docs/results/plan-s27/master.sh 1650 > /tmp/s27.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s27 585          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s27 TOTAL=${1:-1650}
source bench/device_plan.sh

# On an H200 (a plain call may get one), issue 20's GRPO batch first: its H200 figure is all that
# issue lacks (session 23 measured it on an H100 only); the audit then takes what is left.
DB=audit-s27
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  DB=audit-s27-h200
  if grep -q "kbv serve: built" $S/build.txt; then
    t=$(date +%s)
    timeout $(limit 450) python3 bench/serve_grpo.py --device cuda --samples 64 \
      --workers-per-device 4 --prebuilt --cache-dir $KBV_CACHE_DIR --out $S/grpo.json \
      > $S/grpo.txt 2>&1
    say "H200: GRPO (--prebuilt) rc=$? in $(( $(date +%s) - t )) s"
  else
    say "H200: GRPO skipped, kbv serve not built"
  fi
fi
[ -f .kbrun/$DB.sqlite ] && cp .kbrun/$DB.sqlite $S/audit.sqlite
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
  --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
  > $S/audit.txt 2>&1
say "kbv audit rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/trace.jsonl > $S/timeline.txt 2>&1
if [ "$(left)" -gt 250 ]; then
  t=$(date +%s)
  OUT=$S/zoo ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 250) ZOO_PHASE2_S=110 \
    timeout $(limit 400) bench/gpu_zoo.sh > $S/zoo.txt 2>&1
  say "zoo (CUDA files) rc=$? in $(( $(date +%s) - t )) s"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
