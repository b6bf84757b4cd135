#!/usr/bin/env bash
# Session 8, device call 3: the honest side-stream file's timed evaluation (its JSON did not come
# back from call 2: the device tool returns at most 8 files). Verdict and flags on stdout.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-results/s8-call3}
mkdir -p "$OUT"
bash bench/gpu_build.sh "$OUT/build.log" || exit 1
KBV_CACHE_DIR=$PWD/.kbv-cache-s8 build/kbv eval -p problems/level1/3_ReLU.py \
  -c examples/honest/cuda/side_stream_joined.py --device cuda --size large --draws 2 \
  --samples 10 --rounds 2 --quiet --json "$OUT/side_stream_joined.json"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print('verdict', r['verdict'], '|', r['reason'])
print('flags', [(f['id'], f['severity']) for f in r['flags']])
print('speedup', r['speedup'].get('vs_tf32'))
print('trace.gpu', {k: r['candidate'].get('trace', {}).get('gpu', {}).get(k) for k in ('other_streams', 'escaped_us', 'span_us')})
" "$OUT/side_stream_joined.json"
