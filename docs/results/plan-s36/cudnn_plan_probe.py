"""Does a process whose first call of a convolution comes with the device full keep a slow cuDNN
plan for the rest of its life? (Session 35's reading of four audit rows: the side with other
kernels ran at FP32 speed; PyTorch's Conv_v8.cpp skips a plan whose workspace allocation runs
out of memory and caches the first plan that runs.)

Each mode runs in a fresh process, on 57_conv_transposed_2D's shapes (KernelBench level 1), or
with PROBE_CONV=58 on 58_conv_transposed_3D's (session 37: its TF32 baseline 14% slower than its
copy with the same three kernels, drawn ahead while the device was full; PyTorch's
generate_and_filter_plans drops a plan whose workspace exceeds the allocator's cacheInfo, the
device's free memory or its largest cached block, before any allocation: no out-of-memory event):
  clean    TF32 on, the first call with the device free
  starved  TF32 on, the first call with the device taken but for its output and STARVE_MB,
           then the filler freed and the call timed with the device free again
  room     as starved, but ROOM_MB of the filler freed into this process's allocator cache just
           before the first call (the remedy session 38 tried: the plan's workspace is then found
           in the cache however full the device is; withdrawn, docs/measurement.md step 10)
  fp32     TF32 off (the speed a plan without tensor cores gives)
Each prints one JSON line: mode, median ms over 20 calls, kernels a call (torch.profiler) with
their launch grids (a plan's other configuration of the same kernel shows there), and
what the first call held beyond its output (the chosen plan's workspace, about): the headroom a
first call needs, for a rule that keeps it free.
Usage: [PROBE_CONV=58] [STARVE_MB=N] [ROOM_MB=N] python3 cudnn_plan_probe.py
(four modes, a process each)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Session 36 kept 64 MB: too little for anything, the process failed outside the allocator.
# 1 GiB leaves the fallback room and the TF32 plan's 4.1 GB workspace none (STARVE_MB= to change).
STARVE_MB = int(os.environ.get("STARVE_MB", "1024"))
ROOM_MB = int(os.environ.get("ROOM_MB", "8192"))
# The problem's module, input and output shapes.
SHAPES = {
    "57": (lambda nn: nn.ConvTranspose2d(64, 64, 3), (8, 64, 1024, 1024), (8, 64, 1026, 1026)),
    "58": (
        lambda nn: nn.ConvTranspose3d(32, 16, (3, 5, 7), bias=False),
        (16, 32, 16, 32, 64),
        (16, 16, 18, 36, 70),
    ),
}


def run_mode(mode: str) -> dict:
    import math
    import tempfile

    import torch
    from torch import nn

    make, in_shape, out_shape = SHAPES[os.environ.get("PROBE_CONV", "57")]

    torch.backends.cudnn.allow_tf32 = mode != "fp32"
    torch.backends.cudnn.conv.fp32_precision = "ieee" if mode == "fp32" else "tf32"
    device = torch.device("cuda")
    conv = make(nn).to(device)
    x = torch.randn(*in_shape, device=device)
    filler = []
    if mode in ("starved", "room"):
        # Room for the output and STARVE_MB more, not a workspace (room: and ROOM_MB to cache).
        keep = math.prod(out_shape) * 4 + (STARVE_MB << 20)
        keep += (ROOM_MB << 20) if mode == "room" else 0
        while (free := torch.cuda.mem_get_info(device)[0]) > keep + (4 << 20):
            want = min(1 << 30, free - keep) & ~((2 << 20) - 1)
            try:
                filler.append(torch.empty(max(want, 2 << 20), dtype=torch.uint8, device=device))
            except torch.OutOfMemoryError:
                break
    if mode == "room":
        block = torch.empty(ROOM_MB << 20, dtype=torch.uint8, device=device)
        del block  # kept in the allocator's cache: its largest block, ROOM_MB
    # What kbv.plan_pressure watches: the allocator's out-of-memory events, swallowed or not.
    events = []
    torch._C._cuda_attach_out_of_memory_observer(lambda *a: events.append(a[1]))
    free_at_first_call = torch.cuda.mem_get_info(device)[0]
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    with torch.no_grad():
        y = conv(x)
        torch.cuda.synchronize()
        # What the first call held beyond its output: the chosen plan's workspace, about.
        workspace = torch.cuda.max_memory_allocated(device) - before - y.numel() * y.element_size()
        first_call_events = list(events)
        del y
        filler.clear()
        torch.cuda.empty_cache()
        times = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            conv(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            conv(x)
            torch.cuda.synchronize()
        kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
        with tempfile.NamedTemporaryFile(suffix=".json") as trace:
            prof.export_chrome_trace(trace.name)
            with open(trace.name) as exported:
                trace_events = json.load(exported)["traceEvents"]
        launches = sorted(
            {
                (e["name"][:60], str(e.get("args", {}).get("grid")))
                for e in trace_events
                if e.get("cat") == "kernel"
            }
        )[:8]
    times.sort()
    return {
        "mode": mode,
        "median_ms": times[len(times) // 2],
        "kernels": kernels,
        "launches": launches,
        "free_mb_at_first_call": free_at_first_call >> 20,
        "first_call_workspace_mb": round(workspace / 2**20, 1),
        "first_call_oom_events_mb": [round(b / 2**20) for b in first_call_events],
    }


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(run_mode(sys.argv[1])), flush=True)
    else:
        for m in ("clean", "starved", "room", "fp32"):
            done = subprocess.run([sys.executable, __file__, m], capture_output=True, text=True)
            print(done.stdout.strip() or f"{m}: rc={done.returncode} {done.stderr[-400:]}")
