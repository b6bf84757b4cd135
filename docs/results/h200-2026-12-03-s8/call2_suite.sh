#!/usr/bin/env bash
# Session 8, device call 2 (issue 17, the carve): `kbv run` (src/schedule: build-ahead, device
# threads, workers and references started ahead, the gate) over the bundled problems with their
# honest CUDA candidates at KernelBench-like sizes, cold build cache, --profile quick; then the
# same command again, which must store nothing new (resume), and the report.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-results/s8-call2}
mkdir -p "$OUT"
t0=$(date +%s)
git log -1 --format='%H %cd' > "$OUT/commit.txt" 2>/dev/null || true
bash bench/gpu_build.sh "$OUT/build.log" || exit 1
echo "build $(( $(date +%s) - t0 ))s" | tee "$OUT/steps.txt"
export KBV_CACHE_DIR=$PWD/.kbv-cache-s8
run() {
  timeout "${1}" build/kbv run --problems problems --candidates examples/candidates/cuda \
    --db "$OUT/run.sqlite" --device cuda --size large --profile quick --quiet
}
run "${RUN_S:-420}" > "$OUT/run.txt" 2>&1
echo "kbv run rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$OUT/steps.txt"
run 120 > "$OUT/rerun.txt" 2>&1
echo "rerun rc=$? $(( $(date +%s) - t0 ))s: $(head -1 "$OUT/rerun.txt")" | tee -a "$OUT/steps.txt"
build/kbv report "$OUT/run.sqlite" --format md --out "$OUT/report.md"
cat "$OUT/run.txt"
