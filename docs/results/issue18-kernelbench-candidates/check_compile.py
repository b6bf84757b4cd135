#!/usr/bin/env python3
"""Compile-check the KernelBench CUDA candidates on a machine without a GPU.

For each candidate file it
  1. parses it with `ast`;
  2. imports it with `torch.utils.cpp_extension.load_inline` replaced by a recorder, so the
     module's CUDA/C++ sources are captured and nothing is built or run;
  3. writes the sources out the way load_inline lays them out (`<name>.cu` with the same
     prelude, `<name>.cpp` with the declarations and a pybind11 module) and compiles the .cu with
     `nvcc -std=c++17 -c -arch=sm_90 -O3` plus torch's own nvcc flags and include paths
     (`-Xptxas -v`, so register use and spills are reported); with --cpp also the .cpp with g++;
  4. with --problems DIR, builds the problem's Model and the candidate's ModelNew on the CPU from
     the problem's get_init_inputs() (seed 42 before each) and compares their parameter and
     buffer names and shapes (kbv loads redrawn parameters into the candidate by name).

Usage: check_compile.py [--problems DIR] [--cpp] [--out DIR] [FILE ...]
(default files: examples/kernelbench/level1/*.py). Exit status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import subprocess
import sys
import sysconfig
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DEFAULT_DIR = REPO / "examples" / "kernelbench" / "level1"


class _Recorded(Exception):
    pass


def capture_sources(path: Path) -> list[dict]:
    """Import `path` with load_inline recorded; returns the recorded calls' keyword arguments."""
    import torch.utils.cpp_extension as ce

    calls: list[dict] = []

    def fake_load_inline(name, cpp_sources, cuda_sources=None, functions=None, **kw):
        calls.append(
            dict(
                name=name,
                cpp_sources=cpp_sources,
                cuda_sources=cuda_sources,
                functions=functions,
                **{k: v for k, v in kw.items() if k != "verbose"},
            )
        )

        def _missing(*_a, **_k):
            raise RuntimeError("compile-check stub: the extension was not built")

        ns = types.SimpleNamespace()
        for fn in functions or []:
            setattr(ns, fn if isinstance(fn, str) else fn, _missing)
        return ns

    real = ce.load_inline
    ce.load_inline = fake_load_inline
    try:
        spec = importlib.util.spec_from_file_location(f"kbcand_{abs(hash(str(path)))}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        ce.load_inline = real
    for c in calls:
        c["module"] = mod
    return calls


def _as_list(src) -> list[str]:
    if src is None:
        return []
    return [src] if isinstance(src, str) else list(src)


def write_sources(call: dict, out: Path) -> tuple[Path | None, Path]:
    """Lay the sources out as torch.utils.cpp_extension.load_inline does."""
    out.mkdir(parents=True, exist_ok=True)
    name = call["name"]
    cpp = ["#include <torch/extension.h>"] + _as_list(call["cpp_sources"])
    fns = call["functions"] or []
    if isinstance(fns, str):
        fns = [fns]
    if isinstance(fns, dict):
        items = list(fns.items())
    else:
        items = [(f, f) for f in fns]
    binds = "\n".join(f'm.def("{f}", torch::wrap_pybind_function({f}), "{d}");' for f, d in items)
    cpp.append(f"PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{binds}\n}}")
    cpp_path = out / f"{name}.cpp"
    cpp_path.write_text("\n".join(cpp) + "\n")
    cu_path = None
    if call["cuda_sources"] is not None:
        cu = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
        cu += _as_list(call["cuda_sources"])
        cu_path = out / f"{name}.cu"
        cu_path.write_text("\n".join(cu) + "\n")
    return cu_path, cpp_path


def nvcc_cmd(cu: Path, name: str, extra: list[str]) -> list[str]:
    import torch
    import torch.utils.cpp_extension as ce

    inc = []
    for p in ce.include_paths(device_type="cuda") + ["/usr/local/cuda/include"]:
        inc += ["-I", p]
    inc += ["-I", sysconfig.get_paths()["include"]]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return (
        ["nvcc", "-std=c++17", "-c", "-arch=sm_90", "-Xptxas", "-v", "--compiler-options", "-fPIC"]
        + list(ce.COMMON_NVCC_FLAGS)
        + [
            f"-DTORCH_EXTENSION_NAME={name}",
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        ]
        + list(extra)
        + inc
        + [str(cu), "-o", str(cu.with_suffix(".o"))]
    )


def gxx_cmd(cpp: Path, name: str) -> list[str]:
    import torch
    import torch.utils.cpp_extension as ce

    inc = []
    for p in ce.include_paths(device_type="cuda"):
        inc += ["-I", p]
    inc += ["-I", sysconfig.get_paths()["include"]]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return (
        [
            "g++",
            "-std=c++17",
            "-fsyntax-only",
            "-fPIC",
            f"-DTORCH_EXTENSION_NAME={name}",
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        ]
        + inc
        + [str(cpp)]
    )


def check_constructor(path: Path, mod, problems: Path) -> str:
    import torch

    prob = problems / path.name
    if not prob.exists():
        return f"no problem file {prob}"
    spec = importlib.util.spec_from_file_location(f"kbprob_{abs(hash(str(prob)))}", prob)
    pm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pm)
    init = pm.get_init_inputs()
    torch.manual_seed(42)
    ref = pm.Model(*init)
    torch.manual_seed(42)
    cand = mod.ModelNew(*init)

    def state(m):
        return {k: tuple(v.shape) for k, v in m.state_dict().items()}

    rs, cs = state(ref), state(cand)
    if rs != cs:
        return f"state mismatch: reference {rs} candidate {cs}"
    return "ok" + (f" (state {sorted(rs)})" if rs else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--problems", type=Path, default=None)
    ap.add_argument("--cpp", action="store_true", help="also syntax-check the C++ side with g++")
    ap.add_argument("--out", type=Path, default=Path("/tmp/kb_check_src"))
    args = ap.parse_args()
    files = args.files or sorted(DEFAULT_DIR.glob("*.py"), key=lambda p: int(p.name.split("_")[0]))
    failed = 0
    for f in files:
        rec = {"file": str(f)}
        t0 = time.time()
        try:
            ast.parse(f.read_text())
            rec["ast"] = "ok"
            calls = capture_sources(f)
            if len(calls) != 1:
                raise RuntimeError(f"expected one load_inline call, saw {len(calls)}")
            call = calls[0]
            rec["name"] = call["name"]
            extra = list(call.get("extra_cuda_cflags") or [])
            cu, cpp = write_sources(call, args.out / call["name"])
            if cu is None:
                raise RuntimeError("no cuda_sources")
            r = subprocess.run(nvcc_cmd(cu, call["name"], extra), capture_output=True, text=True)
            log = r.stdout + r.stderr
            (args.out / call["name"] / "nvcc.log").write_text(log)
            if r.returncode != 0:
                raise RuntimeError("nvcc failed:\n" + log[-4000:])
            warnings = [ln for ln in log.splitlines() if "warning" in ln.lower()]
            spills = sorted(set(re.findall(r"(\d+) bytes spill stores", log)) - {"0"})
            regs = re.findall(r"Function properties for (\S+)|Used (\d+) registers", log)
            rec["nvcc"] = "ok"
            rec["warnings"] = warnings[:10]
            rec["spill_store_bytes"] = spills
            rec["max_registers"] = max([int(b) for _, b in regs if b] or [0])
            if args.cpp:
                r = subprocess.run(gxx_cmd(cpp, call["name"]), capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError("g++ failed:\n" + (r.stdout + r.stderr)[-4000:])
                rec["cpp"] = "ok"
            if args.problems is not None:
                rec["constructor"] = check_constructor(f, call["module"], args.problems)
                if not rec["constructor"].startswith("ok"):
                    raise RuntimeError(rec["constructor"])
        except Exception as e:  # record and continue
            failed += 1
            rec["error"] = f"{type(e).__name__}: {e}"
        rec["seconds"] = round(time.time() - t0, 1)
        print(json.dumps(rec), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
