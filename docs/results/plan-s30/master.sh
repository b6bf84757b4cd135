#!/usr/bin/env bash
# Session 30's device plan (one detached run over calls, bench/device_plan.sh), at 647ad2b: the
# evaluation's own problem load on the host outside the device's gate (2798231, CPU-tested only).
#  1. Issue 18's audit resumed to its end: on an H200 session 29's H200 database (134 of 250
#     done), on an H100 session 27's (75 done): the whole audit's wall on one kind of card, as
#     the sum of its parts, beside KernelBench's own baseline there.
#  2. With what the audit leaves: the hack zoo's CUDA files on the GPU (bench/gpu_zoo.sh; last run in session 24, before the
#     batched checksums that input-mutation detection now reads), then the rest where time is left.
#  3. On an H200 only: KernelBench's own baseline timing with what is left, resumed from session
#     10's 45 problems (docs/results/h200-2026-12-04-s10/call1/kb_baseline.jsonl); the H100's is
#     complete (session 25).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl):
#   setsid nohup docs/results/plan-s30/master.sh TOTAL > /tmp/s30.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s30 570          (then again at once after each return)
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=${PLAN_DIR:-/tmp/s30} TOTAL=${1:-1400}
source bench/device_plan.sh

H200=0
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
DB=$([ $H200 = 1 ] && echo "${SEED_H200:-audit-s29-h200}" || echo "${SEED_H100:-audit-s27}")
# The two databases as their sessions committed them (carrying .kbrun too would pass the tool's
# 64 MiB with the tree); a later call of this plan finds $S/audit.sqlite and goes on with it.
# (A later plan names later ones: SEED_H200, SEED_H100, folders of docs/results.)
SEED=$([ $H200 = 1 ] && echo "${SEED_H200:-h200-2026-12-06-s29}" || echo "${SEED_H100:-h100-2026-12-06-s27}")
[ -f $S/audit.sqlite ] || gunzip -c docs/results/$SEED/audit.sqlite.gz > $S/audit.sqlite
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $(( TOTAL - 60 ))) build/kbv audit --problems .kb \
  --device cuda --workers-per-device 4 --db $S/audit.sqlite --out $S/audit.md \
  > $S/audit.txt 2>&1
say "kbv audit ($DB) rc=$? in $(( $(date +%s) - t )) s: $(tail -3 $S/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/trace.jsonl --top 20 > $S/timeline.txt 2>&1

if [ "$(left)" -gt 100 ]; then
  t=$(date +%s)
  OUT=$S/zoo ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 250) ZOO_PHASE2_S=110 \
    timeout $(limit 380) bench/gpu_zoo.sh > $S/zoo.txt 2>&1
  say "zoo, CUDA files, rc=$? in $(( $(date +%s) - t )) s: $(grep -E 'detect|false' $S/zoo/zoo_table.md | head -3 | tr '\n' ' ')"
fi
if [ "$(left)" -gt 150 ]; then
  t=$(date +%s)
  OUT=$S/zoo2 ZOO_ONLY='^(hacks|honest)/[a-bd-z]' ZOO_PHASE1_S=$(limit 150) ZOO_PHASE2_S=30 \
    timeout $(limit 200) bench/gpu_zoo.sh > $S/zoo2.txt 2>&1
  say "zoo, the rest, rc=$? in $(( $(date +%s) - t )) s"
fi
if [ $H200 = 1 ] && [ "$(left)" -gt 120 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > $S/pip.txt 2>&1
  cp docs/results/h200-2026-12-04-s10/call1/kb_baseline.jsonl $S/kb_baseline.jsonl
  t=$(date +%s)
  PYTHONPATH=/tmp/site KBV_KERNELBENCH=.kb timeout $(limit $TOTAL) \
    python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out $S/kb_baseline.jsonl \
    > $S/kb_baseline.txt 2>&1
  say "KernelBench baseline rc=$? in $(( $(date +%s) - t )) s; $(wc -l < $S/kb_baseline.jsonl) problems in all"
fi
# With FRESH_AUDIT=1 (a later plan), on an H100 with time left: the audit afresh at this commit
# into $S/fresh.sqlite (seeded from docs/results/$FRESH_SEED/fresh.sqlite.gz where named), the
# whole audit's wall at one commit, in parts over sessions; the H100's resumed audit above spans
# two commits.
if [ "${FRESH_AUDIT:-0}" = 1 ] && [ $H200 = 0 ] && [ "$(left)" -gt 200 ]; then
  if [ ! -f $S/fresh.sqlite ] && [ -n "${FRESH_SEED:-}" ]; then
    gunzip -c docs/results/$FRESH_SEED/fresh.sqlite.gz > $S/fresh.sqlite
  fi
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/fresh-trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
    --device cuda --workers-per-device 4 --db $S/fresh.sqlite --out $S/fresh.md > $S/fresh.txt 2>&1
  say "kbv audit afresh rc=$? in $(( $(date +%s) - t )) s: $(tail -2 $S/fresh.txt | tr '\n' ' ')"
fi
# With FP64_PROBE=1 (a later plan) and time left: the float64 truth's cost on the heaviest
# transposed convolutions, cuDNN's heuristic against its benchmark search
# (plan-s32/fp64_conv_probe.py).
if [ "${FP64_PROBE:-0}" = 1 ] && [ "$(left)" -gt 150 ]; then
  t=$(date +%s)
  timeout $(limit 140) python3 docs/results/plan-s32/fp64_conv_probe.py .kb > $S/fp64_probe.jsonl \
    2> $S/fp64_probe.err
  say "float64 probe rc=$? in $(( $(date +%s) - t )) s: $(wc -l < $S/fp64_probe.jsonl) lines"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
