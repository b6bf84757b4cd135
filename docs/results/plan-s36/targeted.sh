#!/usr/bin/env bash
# Session 36's short device plan, for a budget too small for the whole audit (master.sh): what
# this session's code changed, checked on the GPU.
# 1. The cuDNN plan probe (cudnn_plan_probe.py, about 30 s): does a first call with the device
#    full keep a slow plan, and does torch's allocator report the out-of-memory it swallowed (the
#    event kbv.plan_pressure counts)?
# 2. kbv audit of the convolutions whose copy and baseline ran other kernels in earlier audits
#    (57, 64, 76, 58) and two more, at their own sizes, four evaluations at once as in the whole
#    audit: with plan_pressure (44008b3) no row may show a baseline's fallback plan; refusals
#    show as `evaluated_alone`, dropped ahead draws as `ahead_dropped`.
# 3. The hack zoo's CUDA files (their verdicts after the candidate worker's change, 2746499).
# Usage (carry .kb .deps .whl on EVERY call):
#   setsid nohup docs/results/plan-s36/targeted.sh TOTAL > /tmp/s36.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s36 560   (again at once after each return, same carry)
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
S=/tmp/s36 TOTAL=${1:-900}
source bench/device_plan.sh

[ -f $S/cudnn_plan_probe.txt ] ||
  timeout 150 python3 docs/results/plan-s36/cudnn_plan_probe.py > $S/cudnn_plan_probe.txt 2>&1
say "cuDNN plan probe: $(tr '\n' ' ' < $S/cudnn_plan_probe.txt | cut -c1-600)"

mkdir -p $S/conv/level1
for p in ${CONV_PROBLEMS:-57 64 76 58 54 63}; do cp $S/.kb/level1/${p}_*.py $S/conv/level1/; done
plan_audit $S/conv.sqlite $(( $(left) - ${CONV_RESERVE:-260} )) $S/conv conv
python3 - "$S/conv.sqlite" > "$S/conv_rows.txt" 2>&1 <<'PY'
import json, sqlite3, sys
for problem, verdict, self_speedup, text in sqlite3.connect(sys.argv[1]).execute(
        "select problem, verdict, speedup_vs_tf32, result_json from results"):
    r = json.loads(text)
    flags = sorted(f["id"] for f in r.get("flags", []))
    print(problem[:40], verdict, self_speedup, r.get("problem", {}).get("reference", {}).get(
        "ahead_dropped", "-")[:60], [f for f in flags if f in ("evaluated_alone", "plans_under_pressure")])
PY
say "conv rows (problem|verdict|self|ahead dropped|alone|pressure): $(tr '\n' ' ' < $S/conv_rows.txt)"
[ "$(left)" -gt 150 ] && plan_zoo zoo '^(hacks|honest)/cuda/' 250 100 "$(left)"
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
