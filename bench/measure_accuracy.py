"""Accuracy of the headline time.

measure_accuracy.py launch OUT.json
    A launch-bound op (ReLU of 1024 floats): the engine's headline (kbv.timing.time_calls,
    the worker's timing function) should read the device time (about 3 us), the
    host-inclusive figure the host's (about 24 us); KernelBench's method for comparison.
measure_accuracy.py headline OUT.json [problem ...]
    For each bundled problem's CUDA candidate (KBV_SIZE=large): the engine's headline
    median and the number of kernels one call launches (CUPTI kernel records).
measure_accuracy.py ncu-target HEADLINE.json
    The workload Nsight Compute profiles: 5 calls of each candidate in HEADLINE.json, each
    inside an NVTX range `kbvcall`, nothing else in such a range.
measure_accuracy.py ncu-compare HEADLINE.json NCU.csv OUT.json
    Splits ncu's gpu__time_duration rows per problem (by the kernel counts) and compares a
    single-kernel candidate's median kernel time with the engine's headline.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernelbench_timing as kb  # noqa: E402
from kbv import kernel_audit, timing  # noqa: E402

NCU_CALLS = 5


def launch(out: str) -> None:
    device = torch.device("cuda")
    x = torch.randn(1024, device=device)
    call = lambda i: torch.relu(x)  # noqa: E731
    timed = timing.time_calls(call, device, 100, 3, steady=True)
    second = timing.secondary_times(call, device, 50)
    kb_ms = kb.time_cuda_events(lambda: torch.relu(x), device)
    result = {
        "op": "torch.relu on 1024 float32 elements",
        "headline_median_us": statistics.median(timed["samples_ms"]) * 1e3,
        "headline_method": timed["method"],
        "host_inclusive_median_us": statistics.median(second["host_inclusive_ms"]) * 1e3,
        "hot_median_us": statistics.median(second["hot_ms"]) * 1e3,
        "kernelbench_mean_us": statistics.mean(kb_ms) * 1e3,
        "throttle": {k: v for k, v in timed["throttle"].items() if k != "sm_clock_mhz"},
        "warmup": timed.get("warmup"),
    }
    Path(out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


def _load(rel: str, device: torch.device):
    problem = Path("problems") / rel
    candidate = Path("examples/candidates/cuda") / rel
    import os

    os.environ["TORCH_EXTENSIONS_DIR"] = kb.extensions_dir(candidate)
    ref = kb.load_module(problem, f"acc_ref_{problem.stem}")
    new = kb.load_module(candidate, f"acc_new_{candidate.stem}")
    torch.manual_seed(42)
    model = new.ModelNew(*ref.get_init_inputs()).to(device)
    torch.manual_seed(42)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    return model, inputs


def headline(out: str, problems: list[str]) -> None:
    device = torch.device("cuda")
    if not problems:
        found = Path("problems").rglob("*.py")
        problems = sorted(p.relative_to("problems").as_posix() for p in found)
    rows = {}
    for rel in problems:
        try:
            model, inputs = _load(rel, device)

            def call(i, model=model, inputs=inputs):
                return model(*inputs)

            with torch.no_grad():
                timed = timing.time_calls(call, device, 30, 3, steady=True)
                audit = kernel_audit.kernel_audit(call, device, 3)
            rows[rel] = {
                "headline_median_ms": statistics.median(timed["samples_ms"]),
                "method": timed["method"],
                "kernels_per_call": audit.get("kernels", [None])[0],
                "audit": audit,
            }
        except Exception as error:  # noqa: BLE001
            rows[rel] = {"error": f"{type(error).__name__}: {error}"}
        print(
            rel,
            rows[rel].get("headline_median_ms"),
            rows[rel].get("kernels_per_call"),
            file=sys.stderr,
            flush=True,
        )
        torch.cuda.empty_cache()
    Path(out).write_text(json.dumps(rows, indent=1))


def ncu_target(headline_json: str) -> None:
    device = torch.device("cuda")
    rows = json.loads(Path(headline_json).read_text())
    for rel, row in rows.items():
        if "error" in row or not row.get("kernels_per_call"):
            continue
        model, inputs = _load(rel, device)
        with torch.no_grad():
            for _ in range(3):
                model(*inputs)
            torch.cuda.synchronize()
            for _ in range(NCU_CALLS):
                torch.cuda.nvtx.range_push("kbvcall")
                model(*inputs)
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
        torch.cuda.empty_cache()


def ncu_compare(headline_json: str, ncu_csv: str, out: str) -> None:
    rows = json.loads(Path(headline_json).read_text())
    text = Path(ncu_csv).read_text()
    start = text.find('"ID"')
    durations: list[float] = []
    if start >= 0:
        for rec in csv.DictReader(io.StringIO(text[start:])):
            if rec.get("Metric Name") != "gpu__time_duration.sum":
                continue
            value = float(rec["Metric Value"].replace(",", ""))
            unit = rec.get("Metric Unit", "ns")
            scale = {
                "ns": 1e-6,
                "nsecond": 1e-6,
                "us": 1e-3,
                "usecond": 1e-3,
                "ms": 1.0,
                "msecond": 1.0,
            }.get(unit, 1e-6)
            durations.append(value * scale)
    result = {}
    cursor = 0
    for rel, row in rows.items():
        k = row.get("kernels_per_call")
        if "error" in row or not k:
            continue
        mine = durations[cursor : cursor + k * NCU_CALLS]
        cursor += k * NCU_CALLS
        if len(mine) < k * NCU_CALLS:
            result[rel] = {"error": "ncu reported fewer kernels than expected"}
            continue
        per_call = [sum(mine[i * k : (i + 1) * k]) for i in range(NCU_CALLS)]
        ncu_ms = statistics.median(per_call)
        result[rel] = {
            "kernels_per_call": k,
            "single_kernel": k == 1,
            "ncu_gpu_time_ms": ncu_ms,
            "headline_ms": row["headline_median_ms"],
            "relative_difference": (row["headline_median_ms"] - ncu_ms) / ncu_ms,
        }
    result["_ncu_rows"] = len(durations)
    result["_ncu_rows_used"] = cursor
    Path(out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "launch":
        launch(sys.argv[2])
    elif mode == "headline":
        headline(sys.argv[2], sys.argv[3:])
    elif mode == "ncu-target":
        ncu_target(sys.argv[2])
    elif mode == "ncu-compare":
        ncu_compare(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown mode {mode}")
