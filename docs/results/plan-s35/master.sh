#!/usr/bin/env bash
# Session 35's device plan: the audit afresh under verified protocol 5 (38b71af: the
# well-conditioned elements' normwise budget follows the reference's own error over them), the
# whole 250 at one commit on one card, resumed over calls in $S/audit.sqlite and, where a later
# session names AUDIT_SEED (a docs/results folder holding an audit.sqlite.gz of protocol 5), over
# sessions. Every earlier database is of protocol 4 or older: its keys hold the version, so a
# resume would evaluate all 250 again anyway. Then, with what is left: on an H200 KernelBench's
# own baseline timing (resumed from KB_SEED's kb_baseline.jsonl, default session 10's 45
# problems); on an H100 the hack zoo's CUDA files (session 34 ran the whole zoo there: 22 of 22
# and 61 of 61 as the manifest expects).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl):
#   setsid nohup docs/results/plan-s35/master.sh TOTAL > /tmp/s35.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s35 570          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s35 TOTAL=${1:-1500}
source bench/device_plan.sh

H200=0
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
if [ ! -f $S/audit.sqlite ] && [ -n "${AUDIT_SEED:-}" ]; then
  gunzip -c docs/results/$AUDIT_SEED/audit.sqlite.gz > $S/audit.sqlite
fi
# AUDIT_RESERVE: seconds kept from the audit for what follows it (default none: the audit first).
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $(( $(left) - ${AUDIT_RESERVE:-0} ))) \
  build/kbv audit --problems .kb --device cuda --workers-per-device 4 --db $S/audit.sqlite \
  --out $S/audit.md > $S/audit.txt 2>&1
say "kbv audit (protocol 5) rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/trace.jsonl --top 20 > $S/timeline.txt 2>&1

if [ $H200 = 1 ] && [ "$(left)" -gt 120 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > $S/pip.txt 2>&1
  [ -f $S/kb_baseline.jsonl ] ||
    cp docs/results/${KB_SEED:-h200-2026-12-04-s10/call1}/kb_baseline.jsonl $S/kb_baseline.jsonl
  t=$(date +%s)
  PYTHONPATH=/tmp/site KBV_KERNELBENCH=.kb timeout $(limit $TOTAL) \
    python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out $S/kb_baseline.jsonl \
    > $S/kb_baseline.txt 2>&1
  say "KernelBench baseline rc=$? in $(( $(date +%s) - t )) s; $(wc -l < $S/kb_baseline.jsonl) problems in all"
elif [ "$(left)" -gt 150 ]; then
  t=$(date +%s)
  OUT=$S/zoo ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 250) ZOO_PHASE2_S=100 \
    timeout $(limit 370) bench/gpu_zoo.sh > $S/zoo.txt 2>&1
  say "zoo, CUDA files, rc=$? in $(( $(date +%s) - t )) s"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
