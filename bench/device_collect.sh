#!/usr/bin/env bash
# One device call's share of a detached plan (bench/device_plan.sh): waits up to WAIT_S seconds
# for the plan in /tmp/NAME to finish, prints its summary and log tail, then packs /tmp/NAME into
# $OUT/NAME.tar.gz (big archives the plan names in EXCLUDE left out). Send the next call at once,
# naming the same `carry` (a call without it has the device remove those paths from the checkout):
# the machine goes back 30 s after one.
# Usage: bench/device_collect.sh NAME WAIT_S [EXCLUDE_GLOB]
NAME=${1:?usage: device_collect.sh NAME WAIT_S [EXCLUDE_GLOB]}; WAIT=${2:-500}
S=/tmp/$NAME; t0=$(date +%s)
while [ ! -f "$S/DONE" ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do sleep 5; done
cat "$S/summary.txt" 2>/dev/null; tail -5 "/tmp/$NAME.log" 2>/dev/null
tar czf "${OUT:-/tmp}/$NAME.tar.gz" -C /tmp --exclude="${3:-$NAME/*/gpu-zoo.tgz}" "$NAME" 2>/dev/null
ls -la "${OUT:-/tmp}/$NAME.tar.gz"
