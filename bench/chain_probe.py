"""Where one evaluation's fixed per-process cost goes on a GPU machine: a fresh process is
timed step by step (torch import, kbv import, CUDA context, the first and second operator trace,
kernel trace through torch.profiler, CUPTI tracer warm-up), alone and with N copies at once.
Usage: python3 bench/chain_probe.py [--copies N] [--json OUT]; prints one JSON line per process.
Needs kbv's python package and kbv_native on PYTHONPATH."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

STEP_SCRIPT = r"""
import json, sys, time
t = {}
def timed(name, fn):
    s = time.perf_counter()
    value = fn()
    t[name] = round(time.perf_counter() - s, 4)
    return value
torch = timed("import_torch", lambda: __import__("torch"))
def import_kbv():
    import kbv.candidate, kbv.gpu_guards, kbv.guards, kbv.kernel_audit
    return kbv
kbv = timed("import_kbv", import_kbv)
dev = torch.device("cuda")
x = timed("cuda_context", lambda: (torch.randn(1 << 20, device=dev), torch.cuda.synchronize())[0])
model = torch.nn.ReLU()
for k in (1, 2):
    timed(f"ops_trace_{k}", lambda: kbv.guards.trace_forward(lambda: model(x), None))
def profiler_trace():
    return kbv.gpu_guards.kernel_trace(lambda: model(x), dev)
if sys.argv[1] == "profiler_first":
    for k in (1, 2):
        r = timed(f"torch_profiler_trace_{k}", profiler_trace)
    t["profiler_ok"] = r.get("available")
    timed("cupti_warm_after_profiler", lambda: kbv.kernel_audit.warm_tracer(dev))
else:
    timed("cupti_warm", lambda: kbv.kernel_audit.warm_tracer(dev))
    a = timed("native_audit_2", lambda: kbv.kernel_audit.kernel_audit(lambda i: model(x), dev, 2))
    t["audit_ok"] = a.get("available")
    t["audit_why"] = a.get("why")
    r = timed("torch_profiler_after_native", profiler_trace)
    t["profiler_after_native_ok"] = r.get("available")
    t["profiler_why"] = r.get("why")
print(json.dumps(t))
"""


def run(copies: int, order: str) -> list[dict]:
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STEP_SCRIPT, order], stdout=subprocess.PIPE, text=True
        )
        for _ in range(copies)
    ]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        line = stdout.strip().splitlines()[-1] if stdout.strip() else "{}"
        record = json.loads(line)
        record["copies"] = copies
        record["order"] = order
        record["process_wall_s"] = round(time.perf_counter() - started, 3)
        out.append(record)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--json")
    args = parser.parse_args()
    records = []
    for order in ("profiler_first", "native_first"):
        for copies in args.copies:
            for record in run(copies, order):
                print(json.dumps(record), flush=True)
                records.append(record)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
