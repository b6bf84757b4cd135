#!/usr/bin/env bash
# Session 35's device plan: the audit afresh under verified protocol 5 (38b71af: the
# well-conditioned elements' normwise budget follows the reference's own error over them), the
# whole 250 at one commit on one card, resumed over calls in $S/audit.sqlite and, where a later
# session names AUDIT_SEED (a docs/results folder holding an audit.sqlite.gz of protocol 5), over
# sessions. Every earlier database is of protocol 4 or older: its keys hold the version, so a
# resume would evaluate all 250 again anyway. Then, with what is left: on an H200 KernelBench's
# own baseline timing (resumed from KB_SEED, a kb_baseline.jsonl; default session 10's 45
# problems); on an H100 the hack zoo's CUDA files (session 34 ran the whole zoo there: 22 of 22
# and 61 of 61 as the manifest expects).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl):
#   setsid nohup docs/results/plan-s35/master.sh TOTAL > /tmp/s35.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s35 570   (again at once after each return, with the same carry)
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
S=/tmp/s35 TOTAL=${1:-1500}
source bench/device_plan.sh

if [ ! -f $S/audit.sqlite ] && [ -n "${AUDIT_SEED:-}" ]; then
  gunzip -c docs/results/$AUDIT_SEED/audit.sqlite.gz > $S/audit.sqlite
fi
# AUDIT_RESERVE: seconds kept from the audit for what follows it (default none: the audit first).
plan_audit $S/audit.sqlite $(( $(left) - ${AUDIT_RESERVE:-0} ))
if [ $H200 = 1 ] && [ "$(left)" -gt 120 ]; then
  plan_kb_baseline docs/results/${KB_SEED:-h200-2026-12-04-s10/call1/kb_baseline.jsonl}
elif [ "$(left)" -gt 150 ]; then
  plan_zoo zoo '^(hacks|honest)/cuda/' 250 100 370
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
