#!/usr/bin/env bash
# The measurement engine's benchmarks (issue 7) in one device call, on one GPU:
#   (c) memory: planted allocations through every path (bench/memory_planted/)
#   (b) accuracy: a launch-bound 1024-element op (device ~3 us vs host ~24 us), then
#       single-kernel candidates against Nsight Compute's gpu__time_duration (skipped cleanly
#       when `ncu` is missing or refused)
#   (a) repeatability: the bundled suite (--size large) timed by `kbv run` twice, in separate
#       runs, each followed by KernelBench's timing method (bench/kernelbench_timing.py) on the
#       same problems; median absolute change of the speedup between runs, for both
#   (d) harness cost: per evaluated candidate, compile / correctness / timing / memory seconds
# Every step gets what is left of KBV_MEASURE_BUDGET_S (default 400 s after the build); a step
# that would start with too little left is skipped and says so. Results: $OUT/measure.tgz (and
# $OUT/measure.md, the table from bench/measure_table.py).
#   env: OUT (default results/gpu-measure), KBV_MEASURE_BUDGET_S (330), KBV_MEASURE_PROFILE
#        (standard), KBV_MEASURE_SIZE (large), KBV_MEASURE_DRAWS (1), KBV_MEASURE_PROBLEMS (space-separated paths under
#        problems/, or "all"; default five problems spanning the suite's kinds, so that two
#        timed runs fit the budget: one `kbv eval` costs about 20 s on the H200, most of it
#        correctness, and the first builds about a minute), KBV_MEASURE_SKIP (step names to leave out)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-results/gpu-measure}
RES=results/measure
rm -rf "$RES"
mkdir -p "$RES" "$OUT"
BUDGET=${KBV_MEASURE_BUDGET_S:-330}
PROBLEMS=${KBV_MEASURE_PROBLEMS:-"level1/1_Square_matrix_multiplication.py level1/3_ReLU.py level1/4_Softmax.py level2/1_Gemm_BiasAdd_ReLU.py level3/1_MLP.py"}
[ "$PROBLEMS" = all ] && PROBLEMS=$(cd problems && find . -name '*.py' | sed 's|^\./||' | sort)
# The subset as a suite of its own (copies: the build cache is keyed by content).
SUITE=$RES/suite
for rel in $PROBLEMS; do
  mkdir -p "$SUITE/problems/$(dirname "$rel")" "$SUITE/candidates/$(dirname "$rel")"
  cp "problems/$rel" "$SUITE/problems/$rel"
  cp "examples/candidates/cuda/$rel" "$SUITE/candidates/$rel"
done
echo "$PROBLEMS" > "$RES/problems.txt"
PROFILE=${KBV_MEASURE_PROFILE:-standard}
MSIZE=${KBV_MEASURE_SIZE:-large}  # problem size of the kbv runs and KernelBench's timing
DRAWS=${KBV_MEASURE_DRAWS:-1}
export PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-$PWD/.kbv-cache} PYTHONPATH=$PWD/python:$PWD/build
pack() {
  python3 bench/measure_table.py "$RES" > "$RES/measure.md" 2> "$RES/measure_table.err"
  cp "$RES/measure.md" "$OUT/measure.md" 2>/dev/null
  tar czf "$OUT/measure.tgz" -C results measure
  cat "$RES/measure.md"
}
trap pack EXIT
date -u +%FT%TZ > "$RES/started.txt"
log() { echo "[$(date -u +%T)] $*" | tee -a "$RES/steps.txt"; }

# -- build (not counted in the budget) --------------------------------------------------------
log "build"
bash bench/gpu_build.sh "$RES/build.log" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
  --format=csv > "$RES/gpu.csv" 2>&1
python3 - > "$RES/probe.json" 2>&1 <<'PY'
import json, torch, kbv_native as kn
out = {"has_cuda": kn.has_cuda, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
try:
    out["nvml_clocks"] = kn.nvml_clocks(0)
    out["nvml_sample"] = kn.nvml_sample(0)
except Exception as e:
    out["nvml_error"] = str(e)
out["cupti"] = kn._cupti_init()
print(json.dumps(out, indent=1, default=str))
PY
cat "$RES/probe.json"

START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
# step NAME MIN_SECONDS COMMAND...: runs COMMAND under what is left, if at least MIN_SECONDS is.
step() {
  local name=$1 need=$2; shift 2
  if [[ " ${KBV_MEASURE_SKIP:-} " == *" $name "* ]]; then log "SKIP $name: KBV_MEASURE_SKIP"; return 0; fi
  local remaining; remaining=$(left)
  if [ "$remaining" -lt "$need" ]; then log "SKIP $name: ${remaining}s left, needs ${need}s"; return 0; fi
  log "start $name (${remaining}s left)"
  timeout "$remaining" "$@" > "$RES/$name.log" 2>&1
  local rc=$?
  log "end $name rc=$rc"
  [ $rc -eq 124 ] && log "TIMEOUT $name (budget)"
  return 0
}

# -- (c) memory ---------------------------------------------------------------------------------
step memory_planted 20 python3 bench/memory_planted/run.py "$RES/memory_planted.json"
# -- (b) accuracy, launch-bound op ----------------------------------------------------------------
step accuracy_launch 15 python3 bench/measure_accuracy.py launch "$RES/accuracy_launch.json"

# -- (a) repeatability: run A, KernelBench pass 1, run B, KernelBench pass 2 ----------------------
RUN=(build/kbv run --problems "$SUITE/problems" --candidates "$SUITE/candidates" --device cuda
     --size "$MSIZE" --draws "$DRAWS" --profile "$PROFILE" -q)
step run_a 60 "${RUN[@]}" --db "$RES/run_a.sqlite"
build/kbv export "$RES/run_a.sqlite" --out "$RES/run_a.jsonl" 2>/dev/null
KBV_SIZE=$MSIZE step kernelbench_1 30 python3 bench/kernelbench_timing.py \
  --problems "$SUITE/problems" --candidates "$SUITE/candidates" --out "$RES/kernelbench_1.json"
step run_b 60 "${RUN[@]}" --db "$RES/run_b.sqlite"
build/kbv export "$RES/run_b.sqlite" --out "$RES/run_b.jsonl" 2>/dev/null
KBV_SIZE=$MSIZE step kernelbench_2 30 python3 bench/kernelbench_timing.py \
  --problems "$SUITE/problems" --candidates "$SUITE/candidates" --out "$RES/kernelbench_2.json"

# -- (b) accuracy against Nsight Compute -----------------------------------------------------------
KBV_SIZE=$MSIZE step accuracy_headline 40 python3 bench/measure_accuracy.py headline "$RES/accuracy_headline.json" $PROBLEMS
if ! command -v ncu > /dev/null; then
  log "SKIP ncu: not installed"
  echo '{"skipped": "ncu not found"}' > "$RES/accuracy_ncu.json"
elif [ -s "$RES/accuracy_headline.json" ]; then
  KBV_SIZE=$MSIZE step ncu 40 ncu --nvtx --nvtx-include "kbvcall/" --metrics gpu__time_duration.sum \
    --cache-control all --clock-control none --csv --print-units base \
    --log-file "$RES/ncu_messages.txt" \
    python3 bench/measure_accuracy.py ncu-target "$RES/accuracy_headline.json"
  # With --log-file, ncu's CSV goes to the log file; the program's own output to ncu.log.
  if grep -q '"ID"' "$RES/ncu_messages.txt" 2>/dev/null; then
    python3 bench/measure_accuracy.py ncu-compare "$RES/accuracy_headline.json" \
      "$RES/ncu_messages.txt" "$RES/accuracy_ncu.json" > /dev/null 2>&1
  else
    log "ncu produced no metrics (permissions? see ncu_messages.txt / ncu.log)"
    { echo '{"skipped": "ncu produced no metrics", "log_tail": '
      tail -5 "$RES/ncu_messages.txt" "$RES/ncu.log" 2>/dev/null | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))'
      echo '}'; } > "$RES/accuracy_ncu.json"
  fi
fi
# -- (d) harness cost -------------------------------------------------------------------------------
[ -s "$RES/run_a.sqlite" ] && python3 bench/harness_cost.py "$RES/run_a.sqlite" > "$RES/harness_cost.md" 2>&1
date -u +%FT%TZ > "$RES/finished.txt"
log "done ($(left)s of the budget left)"
