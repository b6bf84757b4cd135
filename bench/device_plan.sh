#!/usr/bin/env bash
# What every detached device plan does before its own steps (sourced, not run): a device call
# lasts at most 10 minutes and the machine goes back 30 s after one, so a plan runs detached
# (`setsid`) across calls in $S and each call collects what it has done (bench/device_collect.sh).
# Usage, at the top of a plan's master.sh (from the repository root):
#   S=/tmp/NAME TOTAL=${1:-1300} source bench/device_plan.sh
# It gives: $S made; KBV_BIN, KBV_NATIVE_DIR, KBV_CACHE_DIR exported; `left` (seconds of TOTAL
# left), `say TEXT` (a timed line in $S/summary.txt), `limit WANT` (WANT capped by what is left);
# the GPU's memory and use sampled every 2 s ($S/gpu_samples.csv: seconds since the epoch, memory,
# use) and the disk used beyond the start, at its peak ($S/disk_peak_bytes.txt); the commit
# ($S/commit.txt); kbv built
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
( while true; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader \
    2>/dev/null | sed "s/^/$(date +%s.%N), /" >> "$S/gpu_samples.csv"; sleep 2; done ) &
PLAN_SAMPLERS="$!"
( base=$(df --output=used -B1 / | tail -1); peak=0
  while true; do d=$(( $(df --output=used -B1 / | tail -1) - base ))
    [ "$d" -gt "$peak" ] && peak=$d; echo "$peak" > "$S/disk_peak_bytes.txt"; sleep 1; done ) &
PLAN_SAMPLERS="$PLAN_SAMPLERS $!"
trap 'kill $PLAN_SAMPLERS 2>/dev/null' EXIT  # the samplers end with the plan
git log -1 --format='%H %s' > "$S/commit.txt" 2>/dev/null
if ! bench/gpu_build.sh "$S/build.log" > "$S/build.txt"; then
  say "build failed"; touch "$S/DONE"; exit 1
fi
say "built; $(tail -1 "$S/build.txt")"
