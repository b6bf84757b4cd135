#!/usr/bin/env bash
# Waits up to WAIT_S seconds for session 20's plan (plan/master.sh) to finish, printing its
# summary, then packs /tmp/s21 into $OUT. Usage: collect.sh WAIT_S
S=/tmp/s21; WAIT=${1:-500}; t0=$(date +%s)
while [ ! -f $S/DONE ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do sleep 5; done
cat $S/summary.txt 2>/dev/null; tail -5 /tmp/s21.log 2>/dev/null
tar czf "${OUT:-/tmp}/s21.tar.gz" -C /tmp --exclude="s21/zoo-*/gpu-zoo.tgz" s21 2>/dev/null
ls -la "${OUT:-/tmp}/s21.tar.gz"
