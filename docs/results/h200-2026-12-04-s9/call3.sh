#!/usr/bin/env bash
# Session 9, device call 3 (H200), after call 2's memory fixes: kbv_native's GPU tests; `kbv run`
# resumed over the sixteen KernelBench candidates (the five call 2 lost to device memory); then
# `kbv audit` over KernelBench levels 1-3 (default draws and profile) for what the call's time
# allows, and KernelBench's own eager baseline timing of exactly the problems audited, for the
# wall-time comparison. One tarball back, plus the two databases.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/kbv-out}
LOG=/tmp/call3; mkdir -p "$OUT" $LOG
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $LOG/summary.txt; }
finish() { kill ${sampler:-0} 2>/dev/null; tar czf "$OUT/call3.tar.gz" -C /tmp call3; }
trap finish EXIT
bench/gpu_build.sh $LOG/build.log || { say "build failed"; exit 1; }
say "built"
export KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do used=$(df --output=used -B1 / | tail -1); d=$((used - base))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > $LOG/disk_peak_bytes.txt; sleep 0.5; done ) &
sampler=$!

timeout 90 python3 -m pytest -q -rs --tb=short tests/python/test_native_arena.py \
  > $LOG/native_arena.txt 2>&1
say "native arena tests rc=$? ($(tail -1 $LOG/native_arena.txt))"

mkdir -p /tmp/kbc/kernelbench && cp -r examples/kernelbench/level1 /tmp/kbc/kernelbench/
cp .kbrun/kb_run.sqlite "$OUT/kb_run.sqlite"
timeout 170 build/kbv run --problems .kb --candidates /tmp/kbc --device cuda \
  --db "$OUT/kb_run.sqlite" > $LOG/kb_run.txt 2>&1
say "kbv run rc=$?"

a0=$(date +%s)
timeout $(( 470 - ($(date +%s) - t0) )) build/kbv audit --problems .kb --device cuda \
  --db "$OUT/audit.sqlite" --out $LOG/audit.md > $LOG/audit.txt 2>&1
say "kbv audit rc=$? in $(( $(date +%s) - a0 )) s"
build/kbv report "$OUT/audit.sqlite" --format json > $LOG/audit_report.json 2>/dev/null
python3 - "$OUT/audit.sqlite" > $LOG/audited.txt <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
for (text,) in con.execute("SELECT result_json FROM results"):
    r = json.loads(text)
    print(r["problem"]["name"], r.get("durations_s", {}).get("total", 0))
PY
say "audited $(wc -l < $LOG/audited.txt) problems"
b0=$(date +%s)
KBV_KERNELBENCH=.kb timeout $(( 590 - ($(date +%s) - t0) )) python3 bench/kernelbench_baseline_time.py \
  --out $LOG/kb_baseline.jsonl --only $(cut -d' ' -f1 $LOG/audited.txt) > $LOG/kb_baseline.txt 2>&1
say "KernelBench baseline timing rc=$? in $(( $(date +%s) - b0 )) s for $(wc -l < $LOG/kb_baseline.jsonl) problems"
say "disk peak $(cat $LOG/disk_peak_bytes.txt) bytes beyond the start"
