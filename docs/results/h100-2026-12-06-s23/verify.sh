#!/usr/bin/env bash
# Session 23's last device call: the four KernelBench problems whose reference copy ended
# harness_error (out of memory even with the device to itself) on the H100 in this session's
# audit, audited again after the re-checks let case B and the repeat's copy go before a fresh copy
# and the reference lets its float64 model go when the cases were not enough; and the GPU twins of
# the reference's own-memory tests. One call, in the foreground; everything lands in $OUT/s23v.
# Usage (repository root, .kb and .deps carried): docs/results/h100-2026-12-06-s23/verify.sh 400
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=${OUT:-/tmp}/s23v TOTAL=${1:-400}
source bench/device_plan.sh

t=$(date +%s)
timeout $(limit 60) python3 -m pytest -q -p no:cacheprovider tests/python/test_memory_cap.py \
  tests/python/test_deferred_sensitivity.py -k "memory or cap or held or place" > $S/tests.txt 2>&1
say "GPU tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

mkdir -p $S/problems/level1 $S/problems/level3
cp .kb/level1/{38_L1Norm_,39_L2Norm_,45_Average_Pooling_2D}.py $S/problems/level1/
cp .kb/level3/2_ShallowWideMLP.py $S/problems/level3/
t=$(date +%s)
KBV_TRACE_CALLS=$S/trace.jsonl timeout $(limit $TOTAL) build/kbv audit --problems $S/problems \
  --device cuda --workers-per-device 1 --db $S/audit.sqlite --out $S/audit.md > $S/audit.txt 2>&1
say "kbv audit (4 problems, one at a time) rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/audit.txt)"
build/kbv audit --problems $S/problems --db $S/audit.sqlite --table-only --out $S/audit.md
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
