#!/usr/bin/env bash
# Issue 4's benchmark on one GPU: `kbv run` with a cold build cache, `kbv run` again with the
# cache warm (same command, fresh database), and KernelBench's own evaluation
# (bench/kernelbench_eval.py: its build_compile_cache in a process pool, then
# eval_kernel_against_ref per candidate, 5 correctness and 100 performance trials) on the same
# candidates (bench/make_bench_set.py: the bundled suite at $SIZE plus a KernelBench
# level-1 subset), each timed end to end; the whole sequence REPEATS times for repeatability.
#
#   TIME_BUDGET_S=480 REPEATS=2 PROFILE=quick WORKERS=4 bench/gpu_suite_bench.sh
#   REPS=1 PHASES="kbv-cold kbv-warm kbv-rewarm" WORKERS_REWARM=4 bench/gpu_suite_bench.sh
#   REPS="2" PHASES="kbv-cold kbv-warm kernelbench" bench/gpu_suite_bench.sh   # a later call
#
# REPS (default "1 2 ... REPEATS") names the repetitions this call runs and PHASES which
# phases, so the sequence can be split over device calls; bench/suite_bench_table.py reads
# several output folders as one.
#
# Needs: .deps/KernelBench (a KernelBench checkout: src/ and KernelBench/level1), optionally
# .deps/pylib (pydantic for KernelBench's eval.py: the H200 image has numpy and requests).
# To make them (on the development machine; the device tool carries .deps, 64 MiB at most):
#   git -C <KernelBench mirror> archive --prefix=KernelBench/ HEAD | tar -x -C .deps
#   pip install -q --target .deps/pylib --python-version 3.12 --only-binary=:all: \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --implementation cp \
#     pydantic
# A phase that would not fit in what is left of TIME_BUDGET_S is skipped and recorded as such;
# KernelBench's evaluation stops taking candidates when the budget ends (the count evaluated is
# recorded, so its per-candidate rate still compares). Everything (phases.jsonl, the kbv
# databases kbv-*.sqlite, kernelbench-*.json, logs, manifest, table.md) is written under
# $OUT/raw (OUT defaults to results/gpu-suite) and packed into $OUT/gpu-suite-rep<REPS>.tgz;
# $OUT keeps only that archive and table.md (the device tool returns at most 8 files). Read
# several calls' folders as one: bench/suite_bench_table.py A/raw B/raw.
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL=${OUT:-results/gpu-suite}
OUT=$FINAL/raw
BUDGET=${TIME_BUDGET_S:-480}
REPEATS=${REPEATS:-2}
JOBS=${JOBS:-$(nproc)}
WORK=${WORK:-/tmp/kbv-suite-bench}
START=$(date +%s.%N)
mkdir -p "$OUT"
rm -rf "$WORK" && mkdir -p "$WORK"
# SIZE: the bundled problems' sizes (small: harness cost dominates; large: KernelBench-like
# GPU work). The KernelBench subset always has KernelBench's own sizes.
SIZE=${SIZE:-small}
export PYTHONUNBUFFERED=1 KBV_SIZE=$SIZE TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export KBV_KERNELBENCH=${KBV_KERNELBENCH:-$PWD/.deps/KernelBench}

elapsed() { python3 -c "import time; print(time.time() - $START)"; }
left() { python3 -c "import time; print(int($BUDGET - (time.time() - $START)))"; }
record() { echo "$1" >> "$OUT/phases.jsonl"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv \
  > "$OUT/gpu.csv" 2>&1
PHASES=${PHASES:-kbv-cold kbv-warm kernelbench}
# Whenever a kbv phase runs (an up-to-date build is a no-op; a build/ left by an older checkout
# must not be used); a call of KernelBench phases only spends nothing on it.
if [[ " $PHASES " == *" kbv-"* ]]; then
  bash bench/gpu_build.sh "$OUT/build.log" || exit 1
fi
record "{\"phase\": \"build_kbv\", \"seconds\": $(elapsed), \"size\": \"$SIZE\"}"
python3 bench/kernelbench_eval.py --check-imports > "$OUT/kernelbench-imports.json" 2>&1
python3 bench/make_bench_set.py --out "$WORK/set" --kernelbench "$KBV_KERNELBENCH" | tee "$OUT/set.txt"
cp "$WORK/set/manifest.json" "$OUT/manifest.json"

# run_phase NAME SECONDS_NEEDED COMMAND...: runs it when it fits, times it, records it.
run_phase() {
  local name=$1 need=$2; shift 2
  local remaining; remaining=$(left)
  if [ "$remaining" -lt "$need" ]; then
    echo "== $name skipped: ${remaining}s left, about ${need}s needed"
    record "{\"phase\": \"$name\", \"skipped\": \"time budget\", \"left_s\": $remaining}"
    return
  fi
  echo "== $name (${remaining}s of the budget left)"
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout "$remaining" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  tail -8 "$OUT/$name.log"
  record "{\"phase\": \"$name\", \"seconds\": $(python3 -c "print($t1 - $t0)"), \"rc\": $rc, \"start\": $t0, \"end\": $t1}"
}

# CPU use over the whole call (/proc/stat every 2 s): builds are CPU-bound, and this shows
# how busy the cores were in each phase (bench/suite_bench_table.py reads it).
( while true; do echo "$(date +%s.%N) $(head -1 /proc/stat)"; sleep 2; done ) > "$OUT/cpu.log" &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT

# PROFILE: kbv's timing profile (quick, standard, precise); WORKERS: evaluations at once on the
# GPU (default: kbv's own default); WORKERS_REWARM: the same for the kbv-rewarm phase, a second
# warm run over the same cache (its repeatability against kbv-warm, at another worker count).
PROFILE=${PROFILE:-standard}
WORKERS=${WORKERS:-default}
WORKERS_REWARM=${WORKERS_REWARM:-$WORKERS}
echo "{\"profile\": \"$PROFILE\", \"workers_per_device\": \"$WORKERS\", \"workers_rewarm\": \"$WORKERS_REWARM\", \"jobs\": $JOBS}" > "$OUT/settings.json"
workers_flag() { [ "$1" = default ] || echo "--workers-per-device $1"; }
KBV_RUN=(build/kbv run --problems "$WORK/set/problems" --candidates "$WORK/set/candidates"
  --device cuda --size "$SIZE" --jobs "$JOBS" --timeout 120 --compile-timeout 300
  --profile "$PROFILE")
# Rough needs (s) from the first repetition, used to skip a phase that cannot finish.
NEED_COLD=60 NEED_WARM=30 NEED_KB=60
wants() { [[ " $PHASES " == *" $1 "* ]]; }
for rep in ${REPS:-$(seq 1 "$REPEATS")}; do
  # shellcheck disable=SC2046  # the flag is empty or two words
  wants kbv-cold && run_phase "kbv-cold-$rep" "$NEED_COLD" "${KBV_RUN[@]}" --cache-dir "$WORK/cache-$rep" \
    --db "$OUT/kbv-cold-$rep.sqlite" $(workers_flag "$WORKERS")
  # The warm runs need the cold run's cache: without it in this call they are cold too.
  # shellcheck disable=SC2046
  wants kbv-warm && run_phase "kbv-warm-$rep" "$NEED_WARM" "${KBV_RUN[@]}" --cache-dir "$WORK/cache-$rep" \
    --db "$OUT/kbv-warm-$rep.sqlite" $(workers_flag "$WORKERS")
  # shellcheck disable=SC2046
  wants kbv-rewarm && run_phase "kbv-rewarm-$rep" "$NEED_WARM" "${KBV_RUN[@]}" \
    --cache-dir "$WORK/cache-$rep" --db "$OUT/kbv-rewarm-$rep.sqlite" $(workers_flag "$WORKERS_REWARM")
  wants kernelbench && run_phase "kernelbench-$rep" "$NEED_KB" python3 bench/kernelbench_eval.py --set "$WORK/set" \
    --out "$OUT/kernelbench-$rep.json" --build-dir "$WORK/kb-build-$rep" --cpu-workers "$JOBS" \
    --time-budget "$(( $(left) - 20 ))"
  # KernelBench again over the same build folder: its compile step finds every extension built
  # (its warm run), and its results a second time (its repeatability within one call).
  wants kernelbench-warm && run_phase "kernelbench-warm-$rep" "$NEED_KB" python3 bench/kernelbench_eval.py \
    --set "$WORK/set" --out "$OUT/kernelbench-warm-$rep.json" --build-dir "$WORK/kb-build-$rep" \
    --cpu-workers "$JOBS" --time-budget "$(( $(left) - 20 ))"
done

kill $SAMPLER 2>/dev/null
python3 bench/suite_bench_table.py "$OUT" > "$OUT/table.md" 2>&1
cat "$OUT/table.md"
echo "total $(elapsed) s"
TAG=$(echo "${REPS:-all}" | tr ' ' '-')
cp "$OUT/table.md" "$FINAL/table-rep$TAG.md"
tar czf "$FINAL/gpu-suite-rep$TAG.tgz" -C "$FINAL" raw && rm -rf "$OUT"
