#!/usr/bin/env bash
# Session 33's device plan (session 32 had 119 s of device time: none started): session 31's plan
# (plan-s31/master.sh over plan-s30's steps: on an H100 the audit resumed from session 31's
# database, 9 left, then the zoo and the audit afresh; on an H200 session 29's, 116 left, the zoo
# and KernelBench's baseline), then with the time left the float64 probe (fp64_conv_probe.py). At
# 444ce7f and later, the first GPU run of: a growth in place, several waiting where they can all
# be granted in turn (`wait_memory` with `grows` in the trace), a refused one letting go of its
# cases after the first draw; and of 31583a1 (a retry alone's loads started when it is deferred).
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl):
#   setsid nohup docs/results/plan-s32/master.sh TOTAL > /tmp/s32.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s32 570          (then again at once after each return)
cd "$(dirname "$0")/../../.." || exit 1
PLAN_DIR=/tmp/s32 SEED_H100=h100-2026-12-07-s31 SEED_H200=h200-2026-12-06-s29 FRESH_AUDIT=1 \
  FP64_PROBE=1 exec docs/results/plan-s30/master.sh "$@"
