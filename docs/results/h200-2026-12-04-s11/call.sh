#!/usr/bin/env bash
# Session 11 device calls (H200). Usage:
#   docs/results/h200-2026-12-04-s11/call.sh NAME END_S [CANDS] [KB_BASELINE]
# TESTS='files': those pytest files first (GPU tests). CANDS=1 (or a regex of file names):
# first `kbv run` (verified, default draws) of the hand-written KernelBench candidates
#   (examples/kernelbench, 16 level-1 problems at their own sizes) against .kb, with the disk in
#   use sampled every 0.5 s (with and without the build cache).
# Then `kbv audit` over KernelBench levels 1-3 (.kb, 423217d), resumed from .kbrun/audit.sqlite,
# WORKERS (6) evaluations per device, every worker call traced, until END_S seconds after the
# start of the call. KB_BASELINE=1: KernelBench's own baseline timing resumes from
# .kbrun/kb_baseline.jsonl instead of the audit. One tarball back in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."
NAME=${1:?name}; END_S=${2:?seconds}; CANDS=${3:-0}; KB=${4:-0}
OUT=${OUT:-/tmp/kbv-out}
LOG=/tmp/$NAME; mkdir -p "$OUT" $LOG
export PYTHONUNBUFFERED=1
t0=$(date +%s)
left() { echo $(( END_S - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $LOG/summary.txt; }
finish() { kill ${sampler:-0} ${gpu_sampler:-0} 2>/dev/null; tar czf "$OUT/$NAME.tar.gz" -C /tmp $NAME; }
trap finish EXIT
bench/gpu_build.sh $LOG/build.log || { say "build failed"; exit 1; }
say "built"
export KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
mkdir -p $KBV_CACHE_DIR
# Disk beyond the start: all of it, and without the build cache (what issue 18 bounds).
( base=$(df --output=used -B1 / | tail -1); cache0=$(du -sb $KBV_CACHE_DIR | cut -f1); peak=0; peakx=0
  while true; do used=$(df --output=used -B1 / | tail -1); d=$((used - base))
    c=$(du -sb $KBV_CACHE_DIR 2>/dev/null | cut -f1); x=$((d - (c - cache0)))
    [ "$d" -gt "$peak" ] && peak=$d; [ "$x" -gt "$peakx" ] && peakx=$x
    echo "$peak $peakx" > $LOG/disk_peak_bytes.txt; sleep 0.5; done ) &
sampler=$!
( while true; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader \
    >> $LOG/gpu_samples.csv 2>/dev/null; sleep 2; done ) &
gpu_sampler=$!
if [ -n "${TESTS:-}" ]; then  # TESTS: pytest files to run first (GPU tests)
  KBV_NATIVE_DIR=$PWD/build timeout 200 python3 -m pytest -q $TESTS > $LOG/tests.txt 2>&1
  say "tests rc=$?: $(tail -1 $LOG/tests.txt)"
fi
if [ "$CANDS" != 0 ]; then  # 1: every candidate; otherwise a regex of their file names
  c0=$(date +%s); cands=examples/kernelbench
  if [ "$CANDS" != 1 ]; then
    cands=/tmp/$NAME-cands; mkdir -p $cands/level1
    for f in examples/kernelbench/level1/*.py; do
      basename "$f" | grep -qE "$CANDS" && cp "$f" $cands/level1/
    done
  fi
  timeout $(( $(left) - 30 )) build/kbv run --problems .kb --candidates $cands \
    --device cuda --db $LOG/cands.sqlite > $LOG/cands.txt 2>&1
  say "kbv run (KernelBench candidates) rc=$? in $(( $(date +%s) - c0 )) s; disk peak (all, without the build cache) $(cat $LOG/disk_peak_bytes.txt)"
  python3 -c "import sqlite3,sys; [print(*r, sep=' | ') for r in sqlite3.connect(sys.argv[1]).execute('select problem, verdict, reason from results')]" \
    $LOG/cands.sqlite > $LOG/cands_verdicts.txt 2>&1
fi
if [ "$KB" = 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > $LOG/pip.txt 2>&1
  [ -f .kbrun/kb_baseline.jsonl ] && cp .kbrun/kb_baseline.jsonl $LOG/kb_baseline.jsonl
  b0=$(date +%s)
  PYTHONPATH=/tmp/site KBV_KERNELBENCH=.kb timeout $(left) \
    python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out $LOG/kb_baseline.jsonl \
    > $LOG/kb_baseline.txt 2>&1
  say "KernelBench baseline rc=$? in $(( $(date +%s) - b0 )) s; $(wc -l < $LOG/kb_baseline.jsonl) problems in all"
elif [ "$(left)" -gt 40 ]; then
  [ -f .kbrun/audit.sqlite ] && cp .kbrun/audit.sqlite $LOG/audit.sqlite
  if [ -n "${AUDIT_FIRST:-}" ]; then  # a regex of level/file paths audited first, on their own
    for f in $(cd .kb && ls level*/*.py | grep -E "$AUDIT_FIRST"); do
      mkdir -p /tmp/$NAME-first/$(dirname $f) && cp .kb/$f /tmp/$NAME-first/$f
    done
    f0=$(date +%s)
    KBV_TRACE_CALLS=$LOG/trace_first.jsonl timeout $(( $(left) - 15 )) build/kbv audit \
      --problems /tmp/$NAME-first --device cuda --workers-per-device ${WORKERS:-6} \
      --db $LOG/audit.sqlite --out $LOG/audit_first.md > $LOG/audit_first.txt 2>&1
    say "kbv audit of $(ls /tmp/$NAME-first/level*/*.py | wc -l) problems first: rc=$? in $(( $(date +%s) - f0 )) s"
  fi
  a0=$(date +%s)
  KBV_TRACE_CALLS=$LOG/trace.jsonl timeout $(( $(left) - 15 )) build/kbv audit --problems .kb \
    --device cuda --workers-per-device ${WORKERS:-6} --db $LOG/audit.sqlite --out $LOG/audit.md \
    > $LOG/audit.txt 2>&1
  say "kbv audit rc=$? in $(( $(date +%s) - a0 )) s"
  build/kbv audit --table-only --db $LOG/audit.sqlite --problems .kb --out $LOG/audit.md \
    > /dev/null 2>&1
  build/kbv audit --table-only --db $LOG/audit.sqlite --problems .kb --format csv \
    --out $LOG/audit.csv > /dev/null 2>&1
  say "audited $(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from results').fetchone()[0])" $LOG/audit.sqlite 2>/dev/null || echo '?') results"
  gzip -f $LOG/trace.jsonl
fi
say "disk peak (all, without the build cache) $(cat $LOG/disk_peak_bytes.txt) bytes beyond the start"
