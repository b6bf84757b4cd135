#!/usr/bin/env bash
# One-off measurement (session 21): the float64 truth in chunks of rows against one run over the
# batch, on the CPU, on the 2 GiB-a-case problem of tests/python/test_large_inputs.py (sum over
# dim 1 of 512 x 1024 x 1024 float32) with its honest candidate, `verified`, one draw a family,
# no timing. For each setting of KBV_TRUTH_CHUNK_BYTES: the wall time, the verdict, and the
# machine's memory in use above its level before the run (AnonPages + Shmem, sampled every 0.2 s):
# the reference's shared-memory cases, its float64 work, the candidate's process. With
# KBV_CASE_CACHE_BYTES=0 in the environment the cases stream one at a time, so the peak is the
# draw's own rather than the case cache's (which sizes itself to the memory free).
# Usage: docs/results/cpu-2026-12-05-s21/truth_rows_memory.sh OUT_DIR [SETTING ...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${1:?usage: truth_rows_memory.sh OUT_DIR [KBV_TRUTH_CHUNK_BYTES ...]}
shift
mkdir -p "$OUT"
PROBLEM=tests/data/large_inputs/level1/6_Sum_reduction_over_a_dimension.py
CANDIDATE=examples/candidates/cpu/level1/6_Sum_reduction_over_a_dimension.py
# Anonymous pages (torch's allocations) and shared memory (the memfd arenas): this VM's
# MemAvailable lags what processes hold.
used() { awk '/^AnonPages:/ {a=$2} /^Shmem:/ {s=$2} END {printf "%.0f\n", (a + s) * 1024}' /proc/meminfo; }
for setting in "${@:-0 default}"; do
  base=$(used)
  ( peak=0; while true; do u=$(( $(used) - base )); [ "$u" -gt "$peak" ] && peak=$u
      echo "$peak" > "$OUT/peak_$setting.txt"; sleep 0.2; done ) &
  sampler=$!
  start=$(date +%s.%N)
  if [ "$setting" = default ]; then unset KBV_TRUTH_CHUNK_BYTES; else export KBV_TRUTH_CHUNK_BYTES=$setting; fi
  build/kbv eval --problem $PROBLEM --candidate $CANDIDATE --device cpu --draws 1 --no-timing \
    --timeout 900 --quiet --json "$OUT/result_$setting.json" > "$OUT/eval_$setting.txt" 2>&1 || true
  end=$(date +%s.%N)
  kill $sampler; wait $sampler 2>/dev/null || true
  python3 - "$OUT" "$setting" "$start" "$end" <<'EOF'
import json, sys
out, setting, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
r = json.load(open(f"{out}/result_{setting}.json"))
peak = int(open(f"{out}/peak_{setting}.txt").read())
chunks = sorted({c.get("truth_chunks", 1) for f in r["correctness"].values()
                 for c in f.get("cases", [])})
import os
cache = os.environ.get("KBV_CASE_CACHE_BYTES", "unset")
line = (f"KBV_CASE_CACHE_BYTES={cache} KBV_TRUTH_CHUNK_BYTES={setting}: {r['verdict']} in {end - start:.1f} s, memory in use "
        f"rose {peak / 2**30:.2f} GiB at its peak; truth chunks per case {chunks}")
print(line)
open(f"{out}/summary.txt", "a").write(line + "\n")
EOF
done
