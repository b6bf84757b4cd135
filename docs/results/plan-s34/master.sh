#!/usr/bin/env bash
# Session 34's device plan: session 30's steps (plan-s30/master.sh) over the newest databases. On an
# H100: session 33's database (250 of 250 stored, 87_conv_pointwise_2D a harness error, which the
# resumed audit evaluates again: 6e5d11f's in-place zeroing at the sensitivity's peak), the hack
# zoo's CUDA files and the rest (not on a GPU since session 24), then the audit afresh at this
# commit (the H100's wall at one commit; the float64 transposed convolutions' own path, 948c0cc,
# first on a GPU: 68/70/78/61_conv_transposed in `prepare_case`'s float64 phase against session
# 31's trace). On an H200: session 29's database (116 left), the zoo, KernelBench's baseline.
# Usage (after `bash scripts/stage_deps.sh` here; carry .kb .deps .whl):
#   setsid nohup docs/results/plan-s34/master.sh TOTAL > /tmp/s34.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s34 570          (then again at once after each return)
cd "$(dirname "$0")/../../.." || exit 1
# First the GPU twin of float64_convs (seconds; no build needed): its figures in the plan's folder.
mkdir -p /tmp/s34
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_float64_convs.py \
  > /tmp/s34/float64_convs_tests.txt 2>&1
PLAN_DIR=/tmp/s34 SEED_H100=h100-2026-12-07-s33 SEED_H200=h200-2026-12-06-s29 FRESH_AUDIT=1 \
  exec docs/results/plan-s30/master.sh "$@"
