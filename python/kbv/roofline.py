"""The reference's side of the roofline floor (src/eval/roofline.cpp): the FLOPs of one
reference forward (torch.utils.flop_counter, which counts matmul, convolution and attention
FLOPs, not elementwise work, so the figure is a lower bound), its compulsory bytes (inputs and
parameters read once, outputs written once) and, for devices without documented peaks, a
measurement of the device's copy bandwidth and FP16 matmul rate. Runs in the reference worker."""

from __future__ import annotations

import threading
from typing import Any

import torch

from . import hosting


def _nbytes(values: Any) -> int:
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
    return total


def warm_up_in_background() -> threading.Thread:
    """FlopCounterMode's first use imports and initialises much of torch's tracing machinery:
    about 2 s on a quiet machine and 4-6 s on the H200 with a dozen workers starting (session 10,
    KBV_TRACE_CALLS), paid by every reference worker in its roofline call, which the device's
    other evaluations may be waiting on. Done on a thread while the worker waits for work (the
    dispatch-mode stack is per thread, so nothing the main thread runs is counted)."""

    def warm() -> None:
        from torch.utils.flop_counter import FlopCounterMode

        x = torch.ones(2, 2)
        with torch.no_grad(), FlopCounterMode(display=False):
            torch.mm(x, x)

    thread = threading.Thread(target=warm, name="kbv-flop-counter-warm-up", daemon=True)
    thread.start()
    return thread


def reference_cost(model: torch.nn.Module, inputs: list, device: torch.device) -> dict[str, Any]:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        result = model(*inputs)
    outputs, _ = hosting.as_outputs(result)
    state = list(model.parameters()) + list(model.buffers())
    l2 = 0
    if device.type == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    return {
        "flops": float(counter.get_total_flops()),
        "input_bytes": _nbytes(inputs),
        "state_bytes": _nbytes(state),
        "output_bytes": _nbytes(outputs),
        "l2_bytes": l2,
    }


def measure_peaks(device: torch.device) -> dict[str, Any]:
    """Best of a few runs: a 1 GiB device-to-device copy (2 bytes moved per byte) and an
    8192^3 FP16 matmul. Only for devices the orchestrator has no documented figures for."""
    if device.type != "cuda":
        return {}

    def best_ms(fn, repeats: int = 5) -> float:
        fn()
        torch.cuda.synchronize(device)
        best = float("inf")
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end))
        return best

    n = 1 << 28  # float32 elements: 1 GiB
    copy = [torch.empty(n, device=device), torch.empty(n, device=device)]
    copy_ms = best_ms(lambda: copy[1].copy_(copy[0]))
    m = 8192
    operands = [torch.randn(m, m, device=device, dtype=torch.float16) for _ in range(2)]
    mm_ms = best_ms(lambda: operands[0] @ operands[1])
    copy.clear()
    operands.clear()
    torch.cuda.empty_cache()
    return {
        "copy_bytes_per_s": 2 * 4 * n / (copy_ms * 1e-3),
        "matmul_flops_per_s": 2 * m**3 / (mm_ms * 1e-3),
    }
