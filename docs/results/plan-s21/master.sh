#!/usr/bin/env bash
# The device plan session 21 left (no device was lent in session 21). Issue 19 first, as in
# session 20's plan, which never ran: the GPU twins of the sensitivity and row-chunk tests; the
# GPU flip count under protocol 4 from zero (10 runs of the 19 honest CUDA files: about 750 s
# at 8 jobs on the H100, resumable from $S/flips-cuda/runs.jsonl); the zoo's CUDA files under
# version 4. Then issue 18's question for the float64 truth in chunks of rows: one draw of five
# heavy problems with the truth whole and in chunks (bench/truth_rows.py: the draw's peak, its
# seconds, the truths' agreement); the heavy KernelBench problems session 19 audited (the 6 GB activations, 63_conv_standard_2D), whose
# `problem.reference.plan.working_bytes` and `evaluated_alone` compare with session 19's
# (h100-2026-12-05-s19/audit.sqlite: Softsign 83.8 GB working). Then issue 20's GRPO batch
# (--prebuilt) with what is left.
# Usage (from the repository root, after `bash scripts/stage_deps.sh` here; carry .kb .deps):
#   call 1: setsid nohup docs/results/plan-s21/master.sh 1300 > /tmp/s22.log 2>&1 < /dev/null &
#           sleep 2; bench/device_collect.sh s22 585
#   call 2, the moment call 1 returns: bench/device_collect.sh s22 585
set -uo pipefail
cd "$(dirname "$0")/../../.."
S=/tmp/s22 TOTAL=${1:-1300}
source bench/device_plan.sh

t=$(date +%s)
timeout $(limit ${TESTS_S:-150}) python3 -m pytest -q -p no:cacheprovider \
  tests/python/test_deferred_sensitivity.py tests/python/test_elementwise_budget.py \
  tests/python/test_row_chunks.py > $S/tests.txt 2>&1
say "GPU tests rc=$? in $(( $(date +%s) - t )) s: $(tail -1 $S/tests.txt)"

t=$(date +%s)
mkdir -p $S/flips-cuda
timeout $(limit ${FLIPS_S:-760}) python3 bench/flip_count.py --runs 10 --device cuda \
  --out $S/flips-cuda --only 'honest/|candidates/' --jobs 8 > $S/flips.txt 2>&1
say "flip count (v4) rc=$? in $(( $(date +%s) - t )) s: $(wc -l < $S/flips-cuda/runs.jsonl) evaluations; $(tail -1 $S/flips.txt)"

if [ "$(left)" -gt 120 ]; then
  t=$(date +%s)
  OUT=$S/zoo-cuda ZOO_ONLY='^(hacks|honest)/cuda/' ZOO_PHASE1_S=$(limit 300) \
    ZOO_PHASE2_S=150 timeout $(limit 470) bench/gpu_zoo.sh > $S/zoo-cuda.txt 2>&1
  say "zoo (CUDA files, v4) rc=$? in $(( $(date +%s) - t )) s"
fi

if [ "$(left)" -gt 120 ]; then
  t=$(date +%s)
  timeout $(limit 240) python3 bench/truth_rows.py --device cuda --out $S/truth_rows.jsonl \
    .kb/level1/19_ReLU.py .kb/level1/30_Softsign.py .kb/level1/23_Softmax.py \
    .kb/level1/63_conv_standard_2D__square_input__square_kernel.py \
    .kb/level1/45_Average_Pooling_2D.py > $S/truth_rows.md 2>&1
  say "truth in chunks against one run, one draw each: rc=$? in $(( $(date +%s) - t )) s"
fi

if [ "$(left)" -gt 150 ]; then
  heavy=/tmp/s22-heavy; rm -rf $heavy
  for f in $(cd .kb && ls level1/*.py | grep -E '^level1/(19|30|31|63)_'); do
    mkdir -p $heavy/level1 && cp .kb/$f $heavy/$f
  done
  t=$(date +%s)
  KBV_TRACE_CALLS=$S/trace_heavy.jsonl timeout $(limit 420) build/kbv audit --problems $heavy \
    --device cuda --workers-per-device 4 --db $S/audit_heavy.sqlite --out $S/audit_heavy.md \
    > $S/audit_heavy.txt 2>&1
  say "kbv audit of the heavy sample (truth in chunks of rows): rc=$? in $(( $(date +%s) - t )) s"
fi

if grep -q "kbv serve: built" $S/build.txt && [ "$(left)" -gt 240 ]; then
  t=$(date +%s)
  timeout $(limit ${GRPO_S:-420}) python3 bench/serve_grpo.py --device cuda --samples 64 \
    --workers-per-device 4 --prebuilt --cache-dir $KBV_CACHE_DIR --out $S/grpo.json \
    > $S/grpo.txt 2>&1
  say "GRPO (--prebuilt) rc=$? in $(( $(date +%s) - t )) s"
else
  say "GRPO skipped: kbv serve not built or under 240 s left"
fi

say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
