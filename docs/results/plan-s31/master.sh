#!/usr/bin/env bash
# Session 32's device plan: session 30's steps (plan-s30/master.sh: the audit resumed to its end,
# the hack zoo's CUDA files and the rest, on an H200 KernelBench's own baseline), the H100's audit
# resumed from session 31's database (241 of 250 done, h100-2026-12-07-s31/), the H200's from
# session 29's (134 done). At 31583a1 and later, the first GPU run of two changes: a growing
# memory reservation waits beside what it holds (10fedd5; `wait_memory` with `grows` in the
# trace), and a retry alone's loads start when it is deferred (31583a1; its result says
# `worker_started_ahead` and `problem.reference.started_ahead`).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl):
#   setsid nohup docs/results/plan-s31/master.sh TOTAL > /tmp/s31.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s31 570          (then again at once after each return)
cd "$(dirname "$0")/../../.." || exit 1
# On an H100, with what the 9 left and the zoo leave: the audit afresh at this commit (FRESH_AUDIT).
PLAN_DIR=/tmp/s31 SEED_H100=h100-2026-12-07-s31 SEED_H200=h200-2026-12-06-s29 FRESH_AUDIT=1 \
  exec docs/results/plan-s30/master.sh "$@"
