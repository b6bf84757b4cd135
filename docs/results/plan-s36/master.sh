#!/usr/bin/env bash
# Session 36's device plan: a cuDNN plan probe (cudnn_plan_probe.py), the whole audit under
# verified protocol 5 on one card, then what that card still owes issue 18.
# - On an H100: the audit afresh, or resumed from AUDIT_SEED (a docs/results folder holding an
#   audit.sqlite.gz of the SAME evaluation code: session 36's plan_pressure changed it, so
#   session 35's 97 no longer qualify), then the hack zoo's CUDA files.
# - On an H200: the audit afresh (no H200 database of protocol 5 exists), then KernelBench's own
#   baseline timing, resumed from KB_SEED (a kb_baseline.jsonl; default session 10's 45 problems).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl on EVERY call: a call
# without them has the device remove them from the checkout, though the plan keeps its own copy):
#   setsid nohup docs/results/plan-s36/master.sh TOTAL > /tmp/s36.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s36 560   (again at once after each return, same carry)
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
S=/tmp/s36 TOTAL=${1:-1500}
source bench/device_plan.sh

# First (about 30 s): does a first call with the device full keep a slow cuDNN plan for good?
# (session 35's reading of the audit rows whose copy and TF32 baseline ran different kernels)
# (PROBE=0 skips it: session 36 recorded its answer)
if [ "${PROBE:-1}" != 0 ]; then
  [ -f $S/cudnn_plan_probe.txt ] ||
    timeout 150 python3 docs/results/plan-s36/cudnn_plan_probe.py > $S/cudnn_plan_probe.txt 2>&1
  say "cuDNN plan probe: $(tr '\n' ' ' < $S/cudnn_plan_probe.txt | cut -c1-400)"
fi

if [ ! -f $S/audit.sqlite ] && [ -n "${AUDIT_SEED:-}" ]; then
  gunzip -c "docs/results/$AUDIT_SEED/audit.sqlite.gz" > $S/audit.sqlite
fi
plan_audit $S/audit.sqlite $(( $(left) - ${AUDIT_RESERVE:-0} ))
if [ "$H200" = 1 ] && [ "$(left)" -gt 120 ]; then
  plan_kb_baseline docs/results/${KB_SEED:-h200-2026-12-04-s10/call1/kb_baseline.jsonl}
elif [ "$(left)" -gt 150 ]; then
  plan_zoo zoo '^(hacks|honest)/cuda/' 250 100 "$(left)"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
