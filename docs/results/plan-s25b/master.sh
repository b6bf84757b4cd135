#!/usr/bin/env bash
# Session 25's second device plan (one call, bench/device_plan.sh), for what session 25 changed
# after its first plan (docs/results/h100-2026-12-06-s25):
#  1. The GPU tests of the reference's memory and the case path's blocks: the segment test with
#     kbv_native on its path; a block made from memory torch's cache held (shared.new_arena).
#  2. 2_ShallowWideMLP alone (ran out in cuMemCreate with 40 GiB in torch's cache: met by 1).
#  3. Level 2's problems 1-14 audited afresh with 4 workers, every call traced: a reference
#     worker now warms the meta device up when it starts; compare `load_phases_s.meta_forward`
#     with the first plan's slice (median 3.6 s).
# Usage (carry .kb .deps):
#   docs/results/plan-s25b/master.sh 380; tar czf $OUT/s25b.tar.gz -C /tmp s25b
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s25b TOTAL=${1:-380}
source bench/device_plan.sh

t=$(date +%s)
timeout $(limit 120) python3 -m pytest -q -p no:cacheprovider tests/python/test_memory_cap.py \
  tests/python/test_native_arena.py tests/python/test_meta_forward.py > $S/tests.txt 2>&1
say "GPU tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

mkdir -p $S/one/problems/level3
cp .kb/level3/2_ShallowWideMLP.py $S/one/problems/level3/
t=$(date +%s)
KBV_TRACE_CALLS=$S/one/trace.jsonl timeout $(limit 120) build/kbv audit \
  --problems $S/one/problems --device cuda --workers-per-device 1 --db $S/one/audit.sqlite \
  --out $S/one/audit.md > $S/one/audit.txt 2>&1
say "2_ShallowWideMLP alone rc=$? in $(( $(date +%s) - t )) s: $(grep -A1 'tasks:' $S/one/audit.txt | tail -1)"

mkdir -p $S/slice/problems/level2
for i in $(seq 1 14); do cp .kb/level2/${i}_*.py $S/slice/problems/level2/; done
t=$(date +%s)
KBV_TRACE_CALLS=$S/slice/trace.jsonl timeout $(limit 400) build/kbv audit \
  --problems $S/slice/problems --device cuda --workers-per-device 4 --db $S/slice/audit.sqlite \
  --out $S/slice/audit.md > $S/slice/audit.txt 2>&1
say "level 2, 1-14 rc=$? in $(( $(date +%s) - t )) s: $(tail -2 $S/slice/audit.txt | tr '\n' ' ')"
python3 bench/trace_timeline.py $S/slice/trace.jsonl > $S/slice/timeline.txt 2>&1
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
