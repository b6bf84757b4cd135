#!/usr/bin/env bash
# Session 10, device calls 2-3 (H200): `kbv audit` over all 250 KernelBench level 1-3 problems
# (423217d; default draws and profile, WORKERS (6) evaluations per device), resumed from
# .kbrun/audit.sqlite when carried; every worker call traced (KBV_TRACE_CALLS). Usage:
#   docs/results/h200-2026-12-04-s10/call2.sh NAME AUDIT_SECONDS [KB_BASELINE]
# KB_BASELINE=1: KernelBench's own baseline timing resumes (from .kbrun/kb_baseline.jsonl) for
# the rest of the call. One tarball back, with the database.
set -uo pipefail
cd "$(dirname "$0")/../../.."
NAME=${1:?name}; AUDIT_S=${2:?seconds}; KB=${3:-0}
OUT=${OUT:-/tmp/kbv-out}
LOG=/tmp/$NAME; mkdir -p "$OUT" $LOG
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $LOG/summary.txt; }
finish() { kill ${sampler:-0} 2>/dev/null; tar czf "$OUT/$NAME.tar.gz" -C /tmp $NAME; }
trap finish EXIT
bench/gpu_build.sh $LOG/build.log || { say "build failed"; exit 1; }
say "built"
export KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do used=$(df --output=used -B1 / | tail -1); d=$((used - base))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > $LOG/disk_peak_bytes.txt; sleep 0.5; done ) &
sampler=$!
( while true; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader \
    >> $LOG/gpu_samples.csv 2>/dev/null; sleep 2; done ) &
gpu_sampler=$!
[ -f .kbrun/audit.sqlite ] && cp .kbrun/audit.sqlite $LOG/audit.sqlite
a0=$(date +%s)
KBV_TRACE_CALLS=$LOG/trace.jsonl timeout $AUDIT_S build/kbv audit --problems .kb --device cuda \
  --workers-per-device ${WORKERS:-6} --db $LOG/audit.sqlite --out $LOG/audit.md > $LOG/audit.txt 2>&1
say "kbv audit rc=$? in $(( $(date +%s) - a0 )) s"
kill $gpu_sampler 2>/dev/null
build/kbv audit --table-only --db $LOG/audit.sqlite --problems .kb --out $LOG/audit.md \
  > /dev/null 2>&1
build/kbv audit --table-only --db $LOG/audit.sqlite --problems .kb --format csv \
  --out $LOG/audit.csv > /dev/null 2>&1
say "audited $(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from results').fetchone()[0])" $LOG/audit.sqlite 2>/dev/null || echo '?') results"
if [ "$KB" = 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > $LOG/pip.txt 2>&1
  [ -f .kbrun/kb_baseline.jsonl ] && cp .kbrun/kb_baseline.jsonl $LOG/kb_baseline.jsonl
  b0=$(date +%s)
  PYTHONPATH=/tmp/site KBV_KERNELBENCH=.kb timeout $(( 585 - ($(date +%s) - t0) )) \
    python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out $LOG/kb_baseline.jsonl \
    > $LOG/kb_baseline.txt 2>&1
  say "KernelBench baseline rc=$? in $(( $(date +%s) - b0 )) s; $(wc -l < $LOG/kb_baseline.jsonl) problems in all"
fi
say "disk peak $(cat $LOG/disk_peak_bytes.txt) bytes beyond the start"
