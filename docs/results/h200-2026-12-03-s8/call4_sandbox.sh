#!/usr/bin/env bash
# Session 8, device call 4: after the two sandbox changes that came after calls 1-3 (build-ahead
# workers without the work root in sight; a private /tmp and HOME for candidate and build
# workers), a few CUDA files through `kbv eval` and a small `kbv run` (build ahead) on the H200.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-results/s8-call4}
mkdir -p "$OUT"
bash bench/gpu_build.sh "$OUT/build.log" || exit 1
export KBV_CACHE_DIR=$PWD/.kbv-cache-s8
one() {
  build/kbv eval -p "$1" -c "examples/$2" --device cuda --size large --draws 2 --samples 10 \
    --rounds 2 --quiet --json "$OUT/$(basename "${2%.py}").json" > /dev/null 2>&1
  python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], r['verdict'], [f['id'] for f in r['flags'] if f['severity'] == 'reject'],
      'private_tmp', r['isolation'].get('private_tmp', {}).get('done'))
" "$OUT/$(basename "${2%.py}").json" "$2"
}
one problems/level1/3_ReLU.py honest/cuda/side_stream_joined.py &
one problems/level1/6_Sum_reduction_over_a_dimension.py honest/cuda/atomic_sum_reduction.py &
one problems/level1/3_ReLU.py hacks/cuda/b2_ghost_global.py &
wait
mkdir -p "$OUT/cands/level1"
cp examples/candidates/cuda/level1/{3_ReLU,4_Softmax,6_Sum_reduction_over_a_dimension}.py "$OUT/cands/level1/"
timeout 100 build/kbv run --problems problems --candidates "$OUT/cands" --db "$OUT/run.sqlite" \
  --device cuda --size large --profile quick --quiet
