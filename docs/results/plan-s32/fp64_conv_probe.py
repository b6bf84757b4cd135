"""One-off probe (session 32's plan): the float64 truth's cost on the audit's heaviest
transposed convolutions, with cuDNN's algorithm heuristic (kbv today: benchmark off) against its
benchmark search (benchmark on), and the float32 forward beside them. In session 31's H100 trace
the truth took 323 s of the reference's time over 166 problems, 79 s of it on
68_conv_transposed_3D (4-8 s a case against 0.1 s for the forward). Prints one JSON line per
problem: seconds per mode (first call, which pays the search, and the best of three after) and the
largest relative difference between the two modes' float64 outputs.
Usage: python3 fp64_conv_probe.py KB_DIR [names...]"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

HEAVIEST = [
    "level1/68_conv_transposed_3D__square_input__asymmetric_kernel.py",
    "level1/70_conv_transposed_3D__asymmetric_input__square_kernel.py",
    "level1/78_conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__.py",
    "level1/69_conv_transposed_2D__asymmetric_input__asymmetric_kernel.py",
    "level1/65_conv_transposed_2D__square_input__asymmetric_kernel.py",
    "level1/61_conv_transposed_3D__square_input__square_kernel.py",
]


def timed(fn) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def float64_modes(model, inputs, out: dict) -> None:
    """The float64 forward under cuDNN's heuristic, then under its benchmark search."""
    model64 = model.double()
    inputs64 = [x.double() if torch.is_tensor(x) else x for x in inputs]
    results = {}
    for benchmark in (False, True):
        torch.backends.cudnn.benchmark = benchmark
        key = "benchmark" if benchmark else "heuristic"
        t = time.perf_counter()
        results[key] = model64(*inputs64)
        torch.cuda.synchronize()
        out[f"{key}_first_s"] = time.perf_counter() - t
        out[f"{key}_s"] = min(timed(lambda: model64(*inputs64)) for _ in range(3))
    a, b = results["heuristic"], results["benchmark"]
    out["max_rel_diff"] = float(((a - b).abs().max() / a.abs().max().clamp_min(1e-300)).item())
    torch.backends.cudnn.benchmark = False


def probe(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda()
    inputs = [x.cuda() if torch.is_tensor(x) else x for x in module.get_inputs()]
    out: dict = {"problem": path.name}
    with torch.no_grad():
        out["float32_s"] = min(timed(lambda: model(*inputs)) for _ in range(3))
        float64_modes(model, inputs, out)
    torch.cuda.empty_cache()
    return out


def main() -> None:
    root = Path(sys.argv[1])
    names = sys.argv[2:] or HEAVIEST
    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(),
                "torch": torch.__version__,
                "cudnn": torch.backends.cudnn.version(),
            }
        ),
        flush=True,
    )
    for name in names:
        try:
            print(json.dumps(probe(root / name)), flush=True)
        except Exception as error:  # one problem's failure is its line, not the probe's end
            print(json.dumps({"problem": name, "error": repr(error)[:300]}), flush=True)


if __name__ == "__main__":
    main()
