#!/usr/bin/env bash
# What every detached device plan does before its own steps (sourced, not run): a device call
# lasts at most 10 minutes and the machine goes back 30 s after one, so a plan runs detached
# (`setsid`) across calls in $S and each call collects what it has done (bench/device_collect.sh).
# Usage, at the top of a plan's master.sh (from the repository root):
#   S=/tmp/NAME TOTAL=${1:-1300} source bench/device_plan.sh
# It gives: $S made; H200 (1 on an H200, else 0); KBV_BIN, KBV_NATIVE_DIR, KBV_CACHE_DIR
# exported; `left` (seconds of TOTAL left), `say TEXT` (a timed line in $S/summary.txt),
# `limit WANT` (WANT capped by what is left);
# the steps plans repeat: `plan_audit DB SECONDS [PROBLEMS] [NAME]` (kbv audit over KernelBench's
# .kb, or PROBLEMS, into DB, traced; $S/NAME.md, default audit),
# `plan_zoo NAME FILTER PHASE1_S PHASE2_S SECONDS` (bench/gpu_zoo.sh over the files FILTER
# matches, into $S/NAME), `plan_kb_baseline SEED_JSONL` (KernelBench's own baseline timing,
# resumed from SEED_JSONL, until TOTAL);
# the GPU's memory and use sampled every 2 s ($S/gpu_samples.csv: seconds since the epoch, memory,
# use) and the disk used beyond the start, at its peak ($S/disk_peak_bytes.txt); the commit
# ($S/commit.txt); KernelBench's tree and the wheels copied into $S (a later call that forgets
# `carry` has the device remove .kb and .whl from the checkout: session 35 lost its audit so);
# kbv built
# (bench/gpu_build.sh; a failed build ends the plan, $S/DONE written).
: "${S:?set S to the plan's folder}" "${TOTAL:?set TOTAL to the plan's seconds}"
mkdir -p "$S"
export PYTHONUNBUFFERED=1 KBV_BIN=$PWD/build/kbv KBV_NATIVE_DIR=$PWD/build KBV_CACHE_DIR=/tmp/kbv-cache
mkdir -p "$KBV_CACHE_DIR"
PLAN_T0=$(date +%s)
left() { echo $(( TOTAL - ($(date +%s) - PLAN_T0) )); }
say() { echo "[$(( $(date +%s) - PLAN_T0 )) s] $*" | tee -a "$S/summary.txt"; }
limit() { local want=$1 l; l=$(( $(left) - 5 )); [ "$l" -lt "$want" ] && want=$l; echo "$want"; }
nvidia-smi > "$S/nvidia-smi.txt" 2>&1
H200=0  # which card came: plans order their steps by it
grep -q H200 "$S/nvidia-smi.txt" && H200=1
( while true; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader \
    2>/dev/null | sed "s/^/$(date +%s.%N), /" >> "$S/gpu_samples.csv"; sleep 2; done ) &
PLAN_SAMPLERS="$!"
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do d=$(( $(df --output=used -B1 / | tail -1) - base ))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > "$S/disk_peak_bytes.txt"; sleep 1; done ) &
PLAN_SAMPLERS="$PLAN_SAMPLERS $!"
trap 'kill $PLAN_SAMPLERS 2>/dev/null' EXIT  # the samplers end with the plan
git log -1 --format='%H %s' > "$S/commit.txt" 2>/dev/null
for d in .kb .whl; do [ -d "$d" ] && [ ! -d "$S/$d" ] && cp -r "$d" "$S/$d"; done
if ! bench/gpu_build.sh "$S/build.log" > "$S/build.txt"; then
  say "build failed"; touch "$S/DONE"; exit 1
fi
say "built; $(tail -1 "$S/build.txt")"

# kbv audit of KernelBench's levels 1-3 (.kb, or PROBLEMS) into DB, its calls traced
# ($S/trace-NAME.jsonl, read into $S/timeline-NAME.txt), for at most SECONDS.
plan_audit() {
  local db=$1 seconds=$2 problems=${3:-$S/.kb} name=${4:-audit} t
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace-$name.jsonl timeout "$(limit "$seconds")" build/kbv audit \
    --problems "$problems" --device cuda --workers-per-device 4 --db "$db" --out "$S/$name.md" \
    > "$S/$name.txt" 2>&1
  say "kbv audit ($name) rc=$? in $(( $(date +%s) - t )) s: $(tail -3 "$S/$name.txt" | tr '\n' ' ')"
  python3 bench/trace_timeline.py "$S/trace-$name.jsonl" --top 20 > "$S/timeline-$name.txt" 2>&1
}

# The hack zoo (bench/gpu_zoo.sh) over the files FILTER matches, into $S/NAME, its two phases
# given PHASE1_S and PHASE2_S, for at most SECONDS. Its table's overall rates count the files
# the filter left out as "no result": the rows of the files it took are what count.
plan_zoo() {
  local name=$1 filter=$2 phase1=$3 phase2=$4 seconds=$5 t
  t=$(date +%s)
  OUT=$S/$name ZOO_ONLY=$filter ZOO_PHASE1_S=$(limit "$phase1") ZOO_PHASE2_S=$phase2 \
    timeout "$(limit "$seconds")" bench/gpu_zoo.sh > "$S/$name.txt" 2>&1
  say "zoo $name ($filter) rc=$? in $(( $(date +%s) - t )) s"
}

# KernelBench's own baseline timing of levels 1-3 (bench/kernelbench_baseline_time.py, its
# pydantic wheels from .whl), resumed from SEED_JSONL into $S/kb_baseline.jsonl, until TOTAL.
plan_kb_baseline() {
  local seed=$1 t
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$S"/.whl/*.whl > "$S/pip.txt" 2>&1
  [ -f "$S/kb_baseline.jsonl" ] || cp "$seed" "$S/kb_baseline.jsonl"
  t=$(date +%s)
  PYTHONPATH=/tmp/site KBV_KERNELBENCH=$S/.kb timeout "$(limit "$TOTAL")" \
    python3 bench/kernelbench_baseline_time.py --levels 1 2 3 --out "$S/kb_baseline.jsonl" \
    > "$S/kb_baseline.txt" 2>&1
  local rc=$? problems
  problems=$(wc -l < "$S/kb_baseline.jsonl")
  say "KernelBench baseline rc=$rc in $(( $(date +%s) - t )) s; $problems problems in all"
}
