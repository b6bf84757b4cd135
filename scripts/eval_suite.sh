#!/usr/bin/env bash
# The main job on the bundled suite: `kbv eval` for every problem in problems/ with its honest
# candidate (CUDA candidates on a GPU, C++ candidates on the CPU), one JSON result per problem,
# and a Markdown table of verdicts, speedups and memory. (`kbv run`, the scheduler for many
# candidates, is the suite-run issue's.)
#
#   scripts/eval_suite.sh [--device cpu|cuda] [--size small|large] [--out DIR] [--jobs N]
#                         [-- extra kbv eval options]
# --jobs N runs N evaluations at once: only for correctness passes (--no-timing), since
# concurrent timing on one device would measure contention.
set -euo pipefail
cd "$(dirname "$0")/.."
KBV=${KBV:-$( [ -x build/kbv ] && echo build/kbv || echo kbv )}
DEVICE=$( [ -e /dev/nvidia0 ] && echo cuda || echo cpu )
SIZE=small OUT=results/suite JOBS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
KIND=$( [ "${DEVICE%%:*}" = cuda ] && echo cuda || echo cpu )
mkdir -p "$OUT"
export KBV DEVICE SIZE OUT KIND
evaluate() {
  local problem=$1 rel name
  rel=${problem#problems/}
  name=$(echo "${rel%.py}" | tr '/' '_')
  "$KBV" eval --problem "$problem" --candidate "examples/candidates/$KIND/$rel" \
    --device "$DEVICE" --size "$SIZE" --json "$OUT/$name.json" --quiet "${@:2}" \
    > "$OUT/$name.txt" 2>&1 || echo "kbv failed on $rel (see $OUT/$name.txt)"
  head -1 "$OUT/$name.txt" | sed "s|^|$rel: |"
}
export -f evaluate
find problems -name '*.py' | sort | xargs -P "$JOBS" -I{} bash -c 'evaluate "$@"' _ {} "$@"
python3 bench/suite_table.py "$OUT" > "$OUT/table.md"
cat "$OUT/table.md"
