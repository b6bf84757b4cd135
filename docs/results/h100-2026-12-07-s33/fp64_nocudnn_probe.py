"""One-off probe (session 33): the float64 forward of the heaviest transposed convolutions with
cuDNN (kbv today) against PyTorch's own path with cuDNN disabled (im2col and cuBLAS DGEMM).
Usage: python3 fp64_nocudnn_probe.py KB_DIR [names...]"""

import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

NAMES = [
    "level1/68_conv_transposed_3D__square_input__asymmetric_kernel.py",
    "level1/70_conv_transposed_3D__asymmetric_input__square_kernel.py",
    "level1/78_conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__.py",
    "level1/61_conv_transposed_3D__square_input__square_kernel.py",
]


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    y = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t, y


for name in sys.argv[2:] or NAMES:
    path = Path(sys.argv[1]) / name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda().double()
    inputs = [x.cuda().double() if torch.is_tensor(x) else x for x in module.get_inputs()]
    out = {"problem": path.name}
    with torch.no_grad():
        results = {}
        for cudnn in (True, False):
            torch.backends.cudnn.enabled = cudnn
            key = "cudnn" if cudnn else "native"
            timed(lambda: model(*inputs))
            torch.cuda.reset_peak_memory_stats()
            out[f"{key}_s"], results[key] = timed(lambda: model(*inputs))
            out[f"{key}_peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
        a, b = results["cudnn"], results["native"]
        out["max_rel_diff"] = float(((a - b).abs().max() / a.abs().max()).item())
    torch.backends.cudnn.enabled = True
    print(json.dumps(out), flush=True)
    del model, inputs, results, a, b
    torch.cuda.empty_cache()
