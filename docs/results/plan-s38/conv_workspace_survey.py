"""How much room does each KernelBench convolution's cuDNN plan need at its first call?

PyTorch's cuDNN v8 path drops, at a key's first call, every plan whose workspace exceeds the
allocator's `cacheInfo` (the device's free memory or the process's largest cached block, the
larger), before allocating anything; the plan chosen is kept for the process. So a first call
made with less room than the plan a clean process chooses keeps another plan, silently
(session 37: 58_conv_transposed_3D's baseline 14% slower than its copy). If a first call has at
least as much room as the plan a clean process chooses needs, it chooses that plan: every plan
ranked above it was dropped or failed in the clean process too. This survey measures that need:
every convolution a problem's forward dispatches (`aten.convolution`, functional calls
included), its first call in TF32 and in FP32, in one process per half of the problems with the
device otherwise free: the allocator's peak during the call above what was allocated before it
and the call's output (the workspace, and any temporaries cuDNN's path makes), and the device's
free memory at the call.
Usage: python3 conv_workspace_survey.py KB_ROOT OUT.jsonl [PARTS PART]   (one JSON line a problem)
"""

from __future__ import annotations

import json
import re
import sys
import time
import traceback
from pathlib import Path

CUDNN_USERS = re.compile(r"nn\.(Conv|ConvTranspose)[123]d|F\.conv|conv[123]d\(|conv_transpose")


def survey(path: Path) -> dict:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    device = torch.device("cuda")
    calls: list[dict] = []

    class Convolutions(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "convolution" not in func.__name__:
                return func(*args, **(kwargs or {}))
            free = torch.cuda.mem_get_info(device)[0]
            before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            out = func(*args, **(kwargs or {}))
            outs = out if isinstance(out, (tuple, list)) else (out,)
            out_bytes = sum(o.numel() * o.element_size() for o in outs if torch.is_tensor(o))
            room = torch.cuda.max_memory_allocated(device) - before - out_bytes
            calls.append({"room": room, "free": free, "shape": list(args[0].shape)})
            return out

    scope: dict = {"__name__": "kb_problem"}
    exec(compile(path.read_text(), str(path), "exec"), scope)
    torch.manual_seed(0)
    model = scope["Model"](*scope["get_init_inputs"]()).to(device).eval()
    inputs = [x.to(device) if torch.is_tensor(x) else x for x in scope["get_inputs"]()]
    row: dict = {"problem": f"{path.parent.name}/{path.name}"}
    for mode in ("tf32", "fp32"):
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        calls.clear()
        started = time.monotonic()
        with torch.no_grad(), Convolutions():
            model(*inputs)
        torch.cuda.synchronize()
        row[mode] = {
            "convolutions": len(calls),
            "max_room_mb": round(max((c["room"] for c in calls), default=0) / 2**20, 1),
            "min_free_mb": min((c["free"] for c in calls), default=0) >> 20,
            "widest": max(calls, key=lambda c: c["room"])["shape"] if calls else None,
            "first_forward_s": round(time.monotonic() - started, 3),
        }
    del model, inputs
    torch.cuda.empty_cache()
    return row


def main() -> None:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    parts, part = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (1, 0)
    done = set()
    if out.exists():
        done = {json.loads(line)["problem"] for line in out.read_text().splitlines() if line}
    files = sorted(
        p
        for level in ("level1", "level2", "level3")
        for p in (root / level).glob("*.py")
        if CUDNN_USERS.search(p.read_text())
    )
    with out.open("a") as sink:
        for i, path in enumerate(files):
            name = f"{path.parent.name}/{path.name}"
            if i % parts != part or name in done:
                continue
            try:
                row = survey(path)
            except Exception as error:  # noqa: BLE001 - a survey row, not a verdict
                row = {"problem": name, "error": f"{type(error).__name__}: {error}"[:300]}
                traceback.print_exc()
                import torch

                torch.cuda.empty_cache()
            print(json.dumps(row), file=sink, flush=True)


if __name__ == "__main__":
    main()
