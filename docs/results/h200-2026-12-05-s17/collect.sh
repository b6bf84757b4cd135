#!/usr/bin/env bash
# Waits up to WAIT_S seconds for session 17's plan (master.sh) to finish, printing its summary
# as it grows, then packs /tmp/s17 into $OUT. Usage: collect.sh WAIT_S
S=/tmp/s17; WAIT=${1:-500}; t0=$(date +%s)
while [ ! -f $S/DONE ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do sleep 5; done
cat $S/summary.txt 2>/dev/null; tail -5 /tmp/s17.log 2>/dev/null
tar czf "${OUT:-/tmp}/s17.tar.gz" -C /tmp --exclude='s17/zoo-*/gpu-zoo.tgz' s17 2>/dev/null
ls -la "${OUT:-/tmp}/s17.tar.gz"
