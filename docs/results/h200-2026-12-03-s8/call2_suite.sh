#!/usr/bin/env bash
# Session 8, device call 2 (issue 17, the carve): the honest side-stream file's timed evaluation
# that call 1's zoo budget cut; `kbv run` (src/schedule: build-ahead, device threads, workers and
# references started ahead, the gate) over the bundled problems with their honest CUDA
# candidates at KernelBench-like sizes, cold build cache, --profile quick, stopped by a time
# budget (timeout kills it, as a user's Ctrl-C would); the same command again, which reclaims
# the killed run's folders and resumes; the report; then the GPU zoo tests call 1 had no time for.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-results/s8-call2}
mkdir -p "$OUT"
t0=$(date +%s)
step() { echo "$1 $(( $(date +%s) - t0 ))s" | tee -a "$OUT/steps.txt"; }
bash bench/gpu_build.sh "$OUT/build.log" || exit 1
step build
export KBV_CACHE_DIR=$PWD/.kbv-cache-s8 PYTHONUNBUFFERED=1
build/kbv eval -p problems/level1/3_ReLU.py -c examples/honest/cuda/side_stream_joined.py \
  --device cuda --size large --draws 2 --samples 10 --rounds 2 --quiet \
  --json "$OUT/side_stream_joined.json" > "$OUT/side_stream_joined.txt" 2>&1
step "side_stream_joined rc=$?"
run() {
  timeout -s INT "$1" build/kbv run --problems problems --candidates examples/candidates/cuda \
    --db "$OUT/run.sqlite" --device cuda --size large --profile quick
}
run "${RUN_S:-300}" > "$OUT/run.txt" 2> "$OUT/run.err"
step "kbv run rc=$?"
run "${RERUN_S:-110}" > "$OUT/rerun.txt" 2> "$OUT/rerun.err"
step "rerun rc=$?"
build/kbv report "$OUT/run.sqlite" --format md --out "$OUT/report.md"
PYTHONPATH=build KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build timeout "${PYTEST_S:-70}" \
  python3 -m pytest -q -p no:cacheprovider tests/python/test_gpu_zoo.py > "$OUT/gpu_zoo_pytest.log" 2>&1
step "gpu zoo pytest rc=$?: $(tail -1 "$OUT/gpu_zoo_pytest.log")"
tail -3 "$OUT/run.txt" "$OUT/rerun.txt"; grep -h "reclaimed" "$OUT/rerun.err"
