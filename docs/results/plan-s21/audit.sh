#!/usr/bin/env bash
# Issue 18's full audit on the device, a session of its own (written in session 21, not run
# yet): `kbv audit` over KernelBench levels 1-3 (.kb, 423217d) under the current protocol,
# resumed from .kbrun/audit.sqlite where a previous session left one (its rows of older
# protocols are evaluated again: the key carries the version), every worker call traced.
# KB_BASELINE=1 runs KernelBench's own baseline timing instead, resumed from
# .kbrun/kb_baseline.jsonl (pydantic and its wheels carried in .whl: see README.md).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps, and .kbrun, .whl if present):
#   call 1: setsid nohup docs/results/plan-s21/audit.sh 1500 > /tmp/s22a.log 2>&1 < /dev/null &
#           sleep 2; bench/device_collect.sh s22a 585
#   calls 2, 3 at once after each: bench/device_collect.sh s22a 585
# Then put the tarball's audit.sqlite (or kb_baseline.jsonl) in .kbrun/ for the next session.
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s22a TOTAL=${1:-1500}
source bench/device_plan.sh

if [ "${KB_BASELINE:-0}" = 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > $S/pip.txt 2>&1
  [ -f .kbrun/kb_baseline.jsonl ] && cp .kbrun/kb_baseline.jsonl $S/kb_baseline.jsonl
  t=$(date +%s)
  PYTHONPATH=/tmp/site KBV_KERNELBENCH=.kb timeout $(limit $TOTAL) \
    python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out $S/kb_baseline.jsonl \
    > $S/kb_baseline.txt 2>&1
  say "KernelBench baseline rc=$? in $(( $(date +%s) - t )) s; $(wc -l < $S/kb_baseline.jsonl) problems in all"
else
  [ -f .kbrun/audit.sqlite ] && cp .kbrun/audit.sqlite $S/audit.sqlite
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems .kb \
    --device cuda --workers-per-device ${WORKERS:-4} --db $S/audit.sqlite --out $S/audit.md \
    > $S/audit.txt 2>&1
  say "kbv audit rc=$? in $(( $(date +%s) - t )) s: $(tail -2 $S/audit.txt | tr '\n' ' ')"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
