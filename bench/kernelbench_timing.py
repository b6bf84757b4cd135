"""KernelBench's timing method, reimplemented from its description (not its code), to set the
engine's repeatability beside it: CUDA events on the current stream around each call, 3 warm-up
calls, 100 trials, a 256 MB L2 clear before every trial, torch's default precision flags, and
the *mean* reported. Speedup = mean(reference) / mean(candidate).

    KBV_SIZE=large PYTHONPATH=python:build python3 bench/kernelbench_timing.py \
        --problems problems --candidates examples/candidates/cuda --out kb.json

Candidate extensions are loaded from kbv's build cache ($KBV_CACHE_DIR, same layout as
src/eval/suite.cpp's extension_cache_dir), so a suite `kbv run` has built them already.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def extensions_dir(candidate: Path) -> str:
    cache = Path(os.environ.get("KBV_CACHE_DIR", Path.home() / ".cache" / "kbv"))
    key = hashlib.sha256(candidate.read_bytes()).hexdigest()[:24]
    return str(cache / "torch_extensions" / f"{key}-cuda" / f"torch-{torch.__version__}")


class L2Clear:
    """KernelBench-style cache clear: write a 256 MB buffer before each trial."""

    def __init__(self, device: torch.device) -> None:
        self.buffer = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=device)

    def __call__(self) -> None:
        self.buffer.fill_(1.0)


def time_cuda_events(fn, device: torch.device, trials: int = 100, warmup: int = 3) -> list[float]:
    """Per-trial ms: events around each call on the current stream, synchronise after each."""
    clear = L2Clear(device)
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize(device)
        times = []
        for _ in range(trials):
            clear()
            torch.cuda.synchronize(device)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
    return times


def measure_problem(problem: Path, candidate: Path, device: torch.device, trials: int) -> dict:
    os.environ["TORCH_EXTENSIONS_DIR"] = extensions_dir(candidate)
    ref_mod = load_module(problem, f"kb_ref_{problem.stem}")
    cand_mod = load_module(candidate, f"kb_new_{candidate.stem}")
    torch.manual_seed(42)
    init = ref_mod.get_init_inputs()
    torch.manual_seed(42)
    model = ref_mod.Model(*init).to(device)
    torch.manual_seed(42)
    new = cand_mod.ModelNew(*init).to(device)
    torch.manual_seed(42)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
    ref_ms = time_cuda_events(lambda: model(*inputs), device, trials)
    new_ms = time_cuda_events(lambda: new(*inputs), device, trials)
    out = {
        "reference_mean_ms": statistics.mean(ref_ms),
        "candidate_mean_ms": statistics.mean(new_ms),
        "reference_std_ms": statistics.stdev(ref_ms),
        "candidate_std_ms": statistics.stdev(new_ms),
    }
    out["speedup"] = out["reference_mean_ms"] / out["candidate_mean_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default="problems")
    parser.add_argument("--candidates", default="examples/candidates/cuda")
    parser.add_argument("--only", nargs="*", default=None, help="relative problem paths")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    device = torch.device("cuda")
    root = Path(args.problems)
    problems = sorted(root.rglob("*.py"))
    results = {}
    for problem in problems:
        rel = problem.relative_to(root).as_posix()
        if args.only and rel not in args.only:
            continue
        candidate = Path(args.candidates) / rel
        started = time.monotonic()
        try:
            results[rel] = measure_problem(problem, candidate, device, args.trials)
            torch.cuda.empty_cache()
        except Exception as error:  # noqa: BLE001 - one problem failing must not stop the run
            results[rel] = {"error": f"{type(error).__name__}: {error}"}
        results[rel]["seconds"] = time.monotonic() - started
        print(f"{rel}: {results[rel]}", file=sys.stderr, flush=True)
    Path(args.out).write_text(
        json.dumps(
            {"method": "kernelbench_cuda_events_mean", "trials": args.trials, "problems": results},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
