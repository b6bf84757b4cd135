#!/usr/bin/env bash
# Waits up to WAIT_S seconds for session 18's plan (master.sh) to finish, printing its summary
# as it grows, then packs /tmp/s18 into $OUT. Usage: collect.sh WAIT_S
S=/tmp/s18; WAIT=${1:-500}; t0=$(date +%s)
while [ ! -f $S/DONE ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do sleep 5; done
cat $S/summary.txt 2>/dev/null; tail -5 /tmp/s18.log 2>/dev/null
tar czf "${OUT:-/tmp}/s18.tar.gz" -C /tmp --exclude='s18/zoo-*/gpu-zoo.tgz' s18 2>/dev/null
ls -la "${OUT:-/tmp}/s18.tar.gz"
