"""KernelBench's own evaluation over the benchmark's candidate set, the way
`scripts/eval_from_generations.py` runs it locally on one GPU (its defaults: 5 correctness
trials, 100 performance trials, 180 s timeout per candidate, cuda_event timing; with its build
cache on: every kernel compiled first in a process pool of `--cpu-workers`, then each
candidate evaluated in a fresh spawned process, one at a time).

KernelBench's code is never copied into this repository: point `--kernelbench` at a checkout
(by default `.deps/KernelBench`, an ignored path). What is used of it, unchanged:
`kernelbench.eval.build_compile_cache` (the compile step) and
`kernelbench.eval.eval_kernel_against_ref` (the evaluation). The driver loop is re-written
here because `scripts/eval_from_generations.py` itself needs `pydra` and `modal`, and its
dataset reader takes one level per run and one build directory per (problem, sample), where
this set spans three levels. Nothing of KernelBench is stubbed (the LLM-client packages its
`utils` imports are, where missing: see LLM_CLIENT_MODULES): `--check-imports` reports which of
KernelBench's imports exist; the package's `__init__` (which imports `kernelbench.utils`, the
LLM-client helpers that need `openai`, `litellm` and `dotenv`) is skipped only when those are
missing, and that is recorded in the output (`package_init`); `utils` adds `torch.rand_mix`
aliases that none of the evaluated problems use.

    python3 bench/kernelbench_eval.py --set DIR --out results.json [--cpu-workers 16]
        [--time-budget SECONDS] [--check-imports]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KB_DEFAULT = REPO / ".deps" / "KernelBench"
# Every third-party module KernelBench's package and eval script import.
KB_IMPORTS = {
    "kernelbench.eval": ["numpy", "requests", "pydantic", "torch"],
    "kernelbench.utils": ["dotenv", "tqdm", "openai", "litellm", "numpy", "torch"],
    "kernelbench.compile": ["tqdm"],
    "scripts/eval_from_generations.py": ["pydra", "modal", "numpy", "tqdm"],
}


def _setup_path() -> dict:
    """KernelBench's src and any carried pure-Python dependencies (.deps/pylib) on sys.path;
    runs at import time so spawned workers see the same path."""
    kb = Path(os.environ.get("KBV_KERNELBENCH", KB_DEFAULT))
    sys.path.insert(0, str(kb / "src"))
    pylib = REPO / ".deps" / "pylib"
    if pylib.is_dir():
        sys.path.append(str(pylib))  # after the system's own packages
    return {"kernelbench": str(kb), "pylib": str(pylib) if pylib.is_dir() else None}


# The LLM-client packages KernelBench's `utils` imports at its top (openai, litellm, dotenv), only
# for querying models. `eval_kernel_against_ref` imports `utils` for one helper
# (`get_gpu_vendor`), so where these packages are missing (the H200 image lacks all three; litellm
# alone is 140 MB, over what a device call carries) they are stood in by placeholder modules:
# every attribute is a function that raises, except `dotenv.load_dotenv`, a no-op (what the real
# one does without a .env file). No evaluation path calls them; one that did would fail loudly,
# never change a figure. Which ones were stood in is recorded in the output.
LLM_CLIENT_MODULES = ("openai", "litellm", "dotenv")


def _placeholder(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__kbv_placeholder__ = True
    # A spec, so importlib.util.find_spec (import_report, and any library probing for the
    # package) answers instead of raising ValueError on a spec-less module.
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)

    def missing(attr: str):
        def fail(*_args, **_kwargs):
            raise RuntimeError(f"{name}.{attr}: a kbv bench placeholder ({name} is missing)")

        return fail

    def load_dotenv(*_args, **_kwargs) -> bool:
        return False

    def module_getattr(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if name == "dotenv" and attr == "load_dotenv":
            return load_dotenv
        return missing(attr)

    module.__getattr__ = module_getattr
    return module


def _stand_in_llm_clients() -> list[str]:
    stood_in = []
    for name in LLM_CLIENT_MODULES:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = _placeholder(name)
            stood_in.append(name)
    return stood_in


PATHS = _setup_path()
PATHS["placeholder_modules"] = _stand_in_llm_clients()


def import_report() -> dict:
    found = {}
    for mods in KB_IMPORTS.values():
        for m in mods:
            placeholder = getattr(sys.modules.get(m), "__kbv_placeholder__", False)
            found[m] = not placeholder and importlib.util.find_spec(m) is not None
    return {
        "modules": found,
        "missing_by_importer": {
            who: [m for m in mods if not found[m]] for who, mods in KB_IMPORTS.items()
        },
    }


def load_kernelbench_eval():
    """kernelbench.eval, through the package when it imports, else with the package's
    __init__ skipped (recorded). Raises when eval.py's own imports are missing."""
    try:
        importlib.import_module("kernelbench")
        init = "imported"
    except ImportError as error:
        spec = importlib.machinery.ModuleSpec("kernelbench", None, is_package=True)
        package = importlib.util.module_from_spec(spec)
        package.__path__ = [str(Path(PATHS["kernelbench"]) / "src" / "kernelbench")]
        sys.modules["kernelbench"] = package
        init = f"skipped: {type(error).__name__}: {error}"
    module = importlib.import_module("kernelbench.eval")
    return module, init


def compile_one(item: dict) -> dict:
    """KernelBench's compile step for one candidate (what compile.compile_single_sample does)."""
    kb_eval, _ = load_kernelbench_eval()
    started = time.time()
    src = Path(item["candidate_path"]).read_text()
    try:
        ok, _, error = kb_eval.build_compile_cache(
            custom_model_src=src, verbose=False, build_dir=item["build_dir"]
        )
    except Exception as error:  # noqa: BLE001 - KernelBench's own last-level catch
        ok, error = None, str(error)
    return {
        "compiled_in_cache_step": ok,
        "compile_error": error,
        "compile_s": time.time() - started,
    }


def evaluate_one(item: dict, trials: dict) -> dict:
    """What eval_from_generations.evaluate_single_sample does for one candidate."""
    import torch

    kb_eval, _ = load_kernelbench_eval()
    ref = Path(item["problem_path"]).read_text()
    src = Path(item["candidate_path"]).read_text()
    device = torch.device("cuda:0")
    try:
        result = kb_eval.eval_kernel_against_ref(
            original_model_src=ref,
            custom_model_src=src,
            measure_performance=True,
            timing_method="cuda_event",
            verbose=False,
            num_correct_trials=trials["correct"],
            num_perf_trials=trials["perf"],
            build_dir=item["build_dir"],
            device=device,
            backend="cuda",
            precision=kb_eval.get_torch_dtype_from_string("fp32"),
        )
    except Exception as error:  # noqa: BLE001 - KernelBench's own last-level catch
        return {"compiled": False, "correctness": False, "metadata": {"other_error": str(error)}}
    if result is None:
        return {"compiled": False, "correctness": False, "metadata": {"error": "None result"}}
    out = result.model_dump() if hasattr(result, "model_dump") else dict(result)
    return json.loads(json.dumps(out, default=str))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", type=Path, help="a folder written by make_bench_set.py")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--build-dir", type=Path, default=None)
    parser.add_argument("--cpu-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--correct-trials", type=int, default=5)
    parser.add_argument("--perf-trials", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--time-budget", type=float, default=float("inf"))
    parser.add_argument("--check-imports", action="store_true")
    parser.add_argument(
        "--without-extensions",
        action="store_true",
        help="only the candidates that build nothing (no load_inline/load): the per-candidate "
        "evaluation cost without the compile step",
    )
    args = parser.parse_args()

    report = import_report()
    if args.check_imports:
        try:
            _, init = load_kernelbench_eval()
            report["kernelbench.eval"] = "imported"
            report["package_init"] = init
        except Exception as error:  # noqa: BLE001 - reported, never papered over
            report["kernelbench.eval"] = f"cannot import: {type(error).__name__}: {error}"
        print(json.dumps({**PATHS, **report}, indent=1))
        return

    started = time.time()
    _, init = load_kernelbench_eval()  # fails loudly when eval.py's imports are missing
    mp.set_start_method("spawn", force=True)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # set_gpu_arch(["Hopper"])
    manifest = json.loads((args.set / "manifest.json").read_text())
    if args.without_extensions:
        manifest = [
            m
            for m in manifest
            if not any(
                f in (args.set / m["candidate"]).read_text() for f in ("load_inline", "load(")
            )
        ]
    build_root = args.build_dir or (args.set / "kb-build")
    items = []
    for m in manifest:
        items.append(
            {
                **m,
                "problem_path": str(args.set / m["problem"]),
                "candidate_path": str(args.set / m["candidate"]),
                "build_dir": str(
                    build_root
                    / "bench"
                    / f"l{m['level']}"
                    / str(m["problem_id"])
                    / str(m["sample"])
                ),
            }
        )

    # 1. The build cache, in a process pool on the CPU cores (compile.batch_compile).
    t = time.time()
    with mp.Pool(args.cpu_workers) as pool:
        compiled = pool.map(compile_one, items, chunksize=1)
    compile_s = time.time() - t
    for item, c in zip(items, compiled, strict=True):
        item.update(c)

    # 2. One candidate at a time, each in a fresh spawned process with the timeout
    #    (batch_eval with num_gpu_devices=1).
    t = time.time()
    trials = {"correct": args.correct_trials, "perf": args.perf_trials}
    done = 0
    for item in items:
        if time.time() - started > args.time_budget:
            item["result"] = None
            item["skipped"] = "time budget"
            continue
        one = time.time()
        with mp.Pool(1) as pool:
            try:
                item["result"] = pool.apply_async(evaluate_one, (item, trials)).get(
                    timeout=args.timeout
                )
            except mp.TimeoutError:
                item["result"] = {
                    "compiled": False,
                    "correctness": False,
                    "metadata": {"error": "Evaluation timed out"},
                }
            except Exception as error:  # noqa: BLE001 - multiprocessing-level failure
                item["result"] = {
                    "compiled": False,
                    "correctness": False,
                    "metadata": {"error": str(error)},
                }
        item["eval_s"] = time.time() - one
        done += 1
        r = item["result"]
        print(
            f"[{done}/{len(items)}] level {item['level']} problem {item['problem_id']} sample "
            f"{item['sample']} ({item['kind']}): compiled={r.get('compiled')} "
            f"correct={r.get('correctness')} runtime={r.get('runtime')} "
            f"ref={r.get('ref_runtime')} ({item['eval_s']:.1f} s)",
            flush=True,
        )
    eval_s = time.time() - t
    total = time.time() - started
    summary = {
        "harness": "kernelbench",
        "package_init": init,
        "placeholder_modules": PATHS["placeholder_modules"],
        "without_extensions": args.without_extensions,
        "imports": report,
        "settings": {
            "correct_trials": args.correct_trials,
            "perf_trials": args.perf_trials,
            "timeout_s": args.timeout,
            "cpu_workers": args.cpu_workers,
            "timing_method": "cuda_event",
        },
        "candidates": len(items),
        "evaluated": done,
        "wall_s": total,
        "compile_s": compile_s,
        "eval_s": eval_s,
        "correct": sum(1 for i in items if (i.get("result") or {}).get("correctness")),
        "compiled": sum(1 for i in items if (i.get("result") or {}).get("compiled")),
        "items": items,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=1, default=str))
    print(
        f"kernelbench: {done}/{len(items)} evaluated, {summary['compiled']} compiled, "
        f"{summary['correct']} correct; wall {total:.1f} s (compile {compile_s:.1f} s, eval "
        f"{eval_s:.1f} s)"
    )


if __name__ == "__main__":
    main()
