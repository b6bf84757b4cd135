"""Does a process whose first call of a convolution comes with the device full keep a slow cuDNN
plan for the rest of its life? (Session 35's reading of four audit rows: the side with other
kernels ran at FP32 speed; PyTorch's Conv_v8.cpp skips a plan whose workspace allocation runs
out of memory and caches the first plan that runs.)

Each mode runs in a fresh process, on 57_conv_transposed_2D's shapes (KernelBench level 1):
  clean    TF32 on, the first call with the device free
  starved  TF32 on, the first call with the device taken but for its output and STARVE_MB,
           then the filler freed and the call timed with the device free again
  fp32     TF32 off (the speed a plan without tensor cores gives)
Each prints one JSON line: mode, median ms over 20 calls, kernels a call (torch.profiler), and
what the first call held beyond its output (the chosen plan's workspace, about): the headroom a
first call needs, for a rule that keeps it free.
Usage: python3 cudnn_plan_probe.py            (runs the three modes, one process each)
"""

from __future__ import annotations

import json
import subprocess
import sys

# Session 36 kept 64 MB: too little for anything, the process failed outside the allocator.
# 1 GiB leaves the fallback room and the TF32 plan's 4.1 GB workspace none.
STARVE_MB = 1024


def run_mode(mode: str) -> dict:
    import torch
    from torch import nn

    torch.backends.cudnn.allow_tf32 = mode != "fp32"
    torch.backends.cudnn.conv.fp32_precision = "ieee" if mode == "fp32" else "tf32"
    device = torch.device("cuda")
    conv = nn.ConvTranspose2d(64, 64, 3).to(device)
    x = torch.randn(8, 64, 1024, 1024, device=device)
    filler = []
    if mode == "starved":
        # Room for the output (8 x 64 x 1026 x 1026 floats) and STARVE_MB more, not a workspace.
        keep = 8 * 64 * 1026 * 1026 * 4 + (STARVE_MB << 20)
        while (free := torch.cuda.mem_get_info(device)[0]) > keep + (4 << 20):
            want = min(1 << 30, free - keep) & ~((2 << 20) - 1)
            try:
                filler.append(torch.empty(max(want, 2 << 20), dtype=torch.uint8, device=device))
            except torch.OutOfMemoryError:
                break
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
    times.sort()
    return {
        "mode": mode,
        "median_ms": times[len(times) // 2],
        "kernels": kernels,
        "free_mb_at_first_call": free_at_first_call >> 20,
        "first_call_workspace_mb": round(workspace / 2**20, 1),
        "first_call_oom_events_mb": [round(b / 2**20) for b in first_call_events],
    }


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(run_mode(sys.argv[1])), flush=True)
    else:
        for m in ("clean", "starved", "fp32"):
            done = subprocess.run([sys.executable, __file__, m], capture_output=True, text=True)
            print(done.stdout.strip() or f"{m}: rc={done.returncode} {done.stderr[-400:]}")
