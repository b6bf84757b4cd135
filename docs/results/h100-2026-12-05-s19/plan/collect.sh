#!/usr/bin/env bash
# Waits up to WAIT_S seconds for the plan session 19 left (plan/master.sh) (master.sh) to finish, printing its summary
# as it grows, then packs /tmp/s19 into $OUT. Usage: collect.sh WAIT_S
S=/tmp/s19; WAIT=${1:-500}; t0=$(date +%s)
while [ ! -f $S/DONE ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do sleep 5; done
cat $S/summary.txt 2>/dev/null; tail -5 /tmp/s19.log 2>/dev/null
tar czf "${OUT:-/tmp}/s19.tar.gz" -C /tmp --exclude="s19/zoo-*/gpu-zoo.tgz" s19 2>/dev/null
ls -la "${OUT:-/tmp}/s19.tar.gz"
