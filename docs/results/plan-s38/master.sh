#!/usr/bin/env bash
# Session 38's device plan: the cuDNN plan filtered by free memory (session 37's reading of its 58
# row), probed, and the first-call room (a plan_pressure.Watch.make_room, withdrawn after the run:
# docs/measurement.md step 10) checked on the GPU.
# 1. cudnn_plan_probe.py on 57's and 58's shapes (clean / starved / room / fp32, a process each).
# 2. conv_workspace_survey.py: the room each KernelBench convolution's first call needs in a
#    clean process (two processes, halves of the 126 problems with a convolution).
# 3. The GPU twins of test_plan_pressure.py.
# 4. kbv audit of level 1's 35 convolutions at their own sizes, four at once as in the whole
#    audit: self speedups, rooms set aside (`plan_rooms` in the draw's figures), refusals.
# 5. Issue 20's GRPO batch (bench/serve_grpo.py) if 420 s are left.
# Usage (carry .kb .deps .whl on EVERY call):
#   setsid nohup docs/results/plan-s38/master.sh TOTAL > /tmp/s38.log 2>&1 < /dev/null &
#   sleep 2; bench/device_collect.sh s38 560   (again at once after each return, same carry)
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
S=/tmp/s38 TOTAL=${1:-900}
source bench/device_plan.sh
P=docs/results/plan-s36/cudnn_plan_probe.py
[ -f $S/probe57.txt ] || timeout 150 python3 $P > $S/probe57.txt 2>&1
[ -f $S/probe58.txt ] || PROBE_CONV=58 STARVE_MB=64 timeout 150 python3 $P > $S/probe58.txt 2>&1
say "probes: $(cut -c1-300 $S/probe57.txt $S/probe58.txt | tr '\n' ' ')"

V=docs/results/plan-s38/conv_workspace_survey.py
timeout 240 python3 $V $S/.kb $S/survey.0.jsonl 2 0 > $S/survey.0.log 2>&1 &
half=$!
timeout 240 python3 $V $S/.kb $S/survey.1.jsonl 2 1 > $S/survey.1.log 2>&1
# That half only: a bare `wait` also waits for the plan's samplers, which never end (session
# 38's run stopped here for good; the rest was run by hand).
wait $half
say "survey: $(cat $S/survey.*.jsonl | wc -l) problems; largest rooms: $(cat $S/survey.*.jsonl |
  python3 -c 'import json,sys; r=[json.loads(l) for l in sys.stdin]; r=[x for x in r if "tf32" in x]
r.sort(key=lambda x: -max(x["tf32"]["max_room_mb"], x["fp32"]["max_room_mb"]))
print([(x["problem"][7:30], x["tf32"]["max_room_mb"], x["fp32"]["max_room_mb"]) for x in r[:8]])')"

timeout 200 python3 -m pytest -q -p no:cacheprovider tests/python/test_plan_pressure.py \
  > $S/gpu_tests.txt 2>&1
say "GPU tests: $(grep -E 'passed|failed' $S/gpu_tests.txt | tail -1)"

mkdir -p $S/conv/level1
cp $S/.kb/level1/*onv*.py $S/conv/level1/
plan_audit $S/conv.sqlite $(( $(left) - 30 )) $S/conv conv
python3 - "$S/conv.sqlite" "$S/trace-conv.jsonl" > "$S/conv_rows.txt" 2>&1 <<'PY'
import json, sqlite3, sys
rooms = [json.loads(l) for l in open(sys.argv[2])]
rooms = [c["detail"]["plan_rooms"] for c in rooms if isinstance(c.get("detail"), dict)
         and "plan_rooms" in c["detail"]]
print("first forwards:", len(rooms), "room set aside:",
      sum(r.get("set_aside", False) for x in rooms for r in x.values()))
for problem, verdict, speedup, text in sqlite3.connect(sys.argv[1]).execute(
        "select problem, verdict, speedup_vs_tf32, result_json from results"):
    r = json.loads(text)
    flags = sorted(f["id"] for f in r.get("flags", []))
    print(problem[:34], verdict, speedup,
          [f for f in flags if f in ("evaluated_alone", "plans_under_pressure")])
PY
say "conv rows: $(wc -l < $S/conv_rows.txt)"
# 5. Issue 20's GRPO batch at this code, where time is left (64 samples, builds made first).
if [ "$(left)" -gt 420 ] && grep -q "kbv serve: built" $S/build.txt; then
  t=$(date +%s)
  timeout $(limit 450) python3 bench/serve_grpo.py --device cuda --samples 64 \
    --workers-per-device 4 --prebuilt --cache-dir $KBV_CACHE_DIR --out $S/grpo.json \
    > $S/grpo.txt 2>&1
  say "GRPO (--prebuilt) rc=$? in $(( $(date +%s) - t )) s: $(tail -4 $S/grpo.txt | tr '\n' ' ')"
fi
say "disk peak $(cat $S/disk_peak_bytes.txt) bytes beyond the start; done"
touch $S/DONE
