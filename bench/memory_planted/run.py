"""Memory benchmark: planted allocations through every path, each measured by the worker's own
memory pass (kbv.memory.peak_memory, the function `kbv eval` runs in the worker) and read
against a control module without the plant. A path passes when the reported peak, less the
control's, is within 1 MiB of the planted bytes.

    PYTHONPATH=python:build python3 bench/memory_planted/run.py OUT.json
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from kbv import memory  # noqa: E402

MIB = 1 << 20
PATHS = ("torch_temporary", "raw_cumemalloc", "cumemallocasync", "cublas_workspace")


def load(name: str) -> torch.nn.Module:
    spec = importlib.util.spec_from_file_location(f"planted_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModelNew().cuda()


def measured(model: torch.nn.Module, x: torch.Tensor) -> dict:
    device = x.device
    memory.observe_first_call(lambda: model(x), device)
    for _ in range(2):  # warm: the memory pass measures a warm call
        model(x)
    torch.cuda.synchronize()
    return memory.peak_memory(lambda: model(x), device)


def main() -> None:
    out_path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("memory_planted.json")
    x = torch.randn(1 << 20, device="cuda")
    control = measured(load("control"), x)
    rows = []
    for name in PATHS:
        row: dict = {"path": name}
        try:
            model = load(name)
            r = measured(model, x)
            planted = int(model.PLANTED_BYTES)
            reported = r["peak_bytes"] - control["peak_bytes"]
            fallback = r.get("fallback_peak_bytes", r["peak_bytes"]) - control.get(
                "fallback_peak_bytes", control["peak_bytes"]
            )
            row.update(
                {
                    "planted_mib": planted / MIB,
                    "reported_mib": reported / MIB,
                    "error_mib": (reported - planted) / MIB,
                    "within_1_mib": abs(reported - planted) <= MIB and planted > 0,
                    "fallback_reported_mib": fallback / MIB,
                    "method": r["method"],
                    "partial": r.get("partial"),
                    "why_partial": r.get("why_partial", ""),
                    "bytes_by_source_mib": {
                        k: v / MIB for k, v in r.get("bytes_by_source", {}).items()
                    },
                    "result": r,
                }
            )
        except Exception as error:  # noqa: BLE001 - one path failing must not hide the others
            row["error"] = f"{type(error).__name__}: {error}"
        rows.append(row)
        print(
            f"{name}: planted {row.get('planted_mib', float('nan')):.2f} MiB, reported "
            f"{row.get('reported_mib', float('nan')):.2f} MiB "
            f"({row.get('method', row.get('error'))})",
            flush=True,
        )
    out_path.write_text(json.dumps({"control": control, "paths": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
