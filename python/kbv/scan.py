"""Static scan of a candidate file: evidence, never a verdict (every finding is a warning or a
note). The file is parsed with `ast`, never executed, and never in the candidate's process (the
reference worker runs this), so the candidate cannot patch the scanner.

C++/CUDA sources are the string constants the file passes to `load_inline` (directly, or
through names assigned string constants); they are searched for library compute calls and
reduced-precision types, on the source with comments and string literals removed."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

from . import scan_cuda

# (finding id, severity, what it means)
FINDINGS = {
    "scan_threads": ("warn", "starts threads or processes (threading, multiprocessing, futures)"),
    "scan_streams": ("warn", "creates CUDA streams or graphs"),
    "scan_monkey_patch": ("warn", "assigns attributes of a module it did not define"),
    "scan_introspection": ("warn", "introspects the process (gc, inspect, frames, sys.modules)"),
    "scan_io": ("warn", "opens files, runs processes or uses the network"),
    "scan_seed": ("warn", "seeds a random generator"),
    "scan_numerics_flags": ("warn", "sets global numerics flags (TF32, precision, threads)"),
    "scan_low_precision": ("info", "casts to half or bfloat16"),
    "scan_library_compute": ("info", "calls a library matmul/conv/softmax"),
    "scan_cpp_library_compute": ("warn", "C++ source calls an ATen/torch compute function"),
    "scan_cpp_low_precision": ("info", "C++ source uses half or bfloat16 types"),
    "scan_error": ("warn", "the file could not be scanned"),
}
FINDINGS.update(scan_cuda.FINDINGS)

_THREAD_MODULES = {"threading", "multiprocessing", "concurrent", "_thread", "asyncio"}
_IO_MODULES = {"socket", "subprocess", "urllib", "http", "requests", "shutil", "ctypes"}
_INTROSPECTION = {"gc", "inspect", "traceback"}
_IO_CALLS = {
    "open",
    "os.open",
    "os.system",
    "os.popen",
    "os.listdir",
    "os.walk",
    "os.scandir",
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.replace",
    "os.kill",
    "os.getppid",
    "os.environ.get",
    "os.getenv",
    "Path.read_text",
    "Path.read_bytes",
    "Path.write_text",
    "Path.write_bytes",
}
_NUMERICS = (
    "allow_tf32",
    "fp32_precision",
    "set_float32_matmul_precision",
    "set_num_threads",
    "allow_fp16_reduced_precision_reduction",
    "allow_bf16_reduced_precision_reduction",
    "set_default_dtype",
    "use_deterministic_algorithms",
    "benchmark",
    "deterministic",
)
_LIBRARY_CALLS = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "einsum",
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose2d",
    "softmax",
    "log_softmax",
    "layer_norm",
    "cross_entropy",
    "scaled_dot_product_attention",
}
_LOW_PRECISION = {"half", "bfloat16", "float16"}
# Decorators that make a Triton kernel of a function (triton.jit; autotune and heuristics wrap one).
_TRITON_DECOR = {"jit", "autotune", "heuristics"}
_CPP_LIBRARY = re.compile(
    r"\b(?:at|torch)::(?:matmul|mm|bmm|addmm|baddbmm|linear|einsum|conv\w*|_convolution|"
    r"convolution|softmax|log_softmax|_softmax|layer_norm|native_layer_norm|cross_entropy\w*|"
    r"scaled_dot_product_attention|cudnn_\w+|mkldnn_\w+)\s*\("
)
_CPP_TENSOR_METHOD = re.compile(r"\.\s*(?:matmul|mm|bmm|addmm|softmax|log_softmax)\s*\(")
_CPP_LOW = re.compile(
    r"\b(?:__half2?|__nv_bfloat16\w*|at::Half|at::BFloat16|c10::Half|c10::BFloat16|"
    r"torch::kHalf|torch::kBFloat16|torch::kFloat16|at::kHalf|at::kBFloat16|half_t)\b"
)


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    elif isinstance(node, ast.Subscript):
        parts.append(_dotted(node.value) + "[]")
    else:
        return ""
    return ".".join(reversed(parts))


def strip_cpp(source: str) -> str:
    """C/C++ source without comments and string or character literals."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: dict[str, list[str]] = {}
        self.imported: dict[str, str] = {}  # local name -> module it names
        # name -> the distinct string constants assigned to it (a set in insertion order: with a
        # list, each `x = f(x)` doubled x's strings, and KernelBench's 29_SwinMLP, dozens of them,
        # took the scan 31 s and tens of GB of host memory on the device (session 27); a
        # candidate could have spent all of it on purpose)
        self.strings: dict[str, dict[str, None]] = {}
        self.source_args: list[ast.AST] = []
        self.defined: set[str] = set()
        self.triton_kernels: list[str] = []  # functions decorated with triton.jit/autotune

    def add(self, finding: str, evidence: str, line: int) -> None:
        items = self.findings.setdefault(finding, [])
        if len(items) < 5:
            items.append(f"line {line}: {evidence}")

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imported[alias.asname or alias.name.split(".")[0]] = alias.name
            self._module_use(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            self.imported[alias.asname or alias.name] = f"{module}.{alias.name}"
        self._module_use(module, node.lineno)
        if module == "sys" and any(a.name in ("modules", "_getframe") for a in node.names):
            self.add("scan_introspection", f"from sys import {node.names[0].name}", node.lineno)

    def _module_use(self, module: str, line: int) -> None:
        root = module.split(".")[0]
        if root in _THREAD_MODULES:
            self.add("scan_threads", f"import {module}", line)
        if root in _IO_MODULES:
            self.add("scan_io", f"import {module}", line)
        if root in _INTROSPECTION:
            self.add("scan_introspection", f"import {module}", line)

    def _resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        if head in self.imported:
            full = self.imported[head]
            return f"{full}.{rest}" if rest else full
        return dotted

    # definitions
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.defined.add(node.name)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.defined.add(node.name)
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            resolved = self._resolve(_dotted(target))
            if resolved.startswith("triton.") and resolved.rsplit(".", 1)[-1] in _TRITON_DECOR:
                if node.name not in self.triton_kernels:
                    self.triton_kernels.append(node.name)
                break
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target, node.value, node.lineno)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assigned(node.target, node.value, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assigned(node.target, node.value, node.lineno)
        self.generic_visit(node)

    def _assigned(self, target: ast.AST, value: ast.AST, line: int) -> None:
        if isinstance(target, ast.Name):
            self.strings.setdefault(target.id, {}).update(_string_constants(value, self.strings))
            # a name bound to a module found at run time (sys.modules, importlib)
            source = self._resolve(_dotted(value.func if isinstance(value, ast.Call) else value))
            if source.startswith(("sys.modules", "importlib.import_module")):
                self.imported[target.id] = source
        elif isinstance(target, ast.Attribute):
            dotted = _dotted(target)
            resolved = self._resolve(dotted)
            head = dotted.split(".")[0]
            if any(flag in dotted for flag in _NUMERICS):
                self.add("scan_numerics_flags", dotted, line)
            elif head in self.imported or head in ("sys", "builtins"):
                self.add("scan_monkey_patch", f"{resolved} = ...", line)
        elif isinstance(target, ast.Subscript):
            dotted = self._resolve(_dotted(target.value))
            if dotted.startswith("sys.modules"):
                self.add("scan_monkey_patch", "sys.modules[...] = ...", line)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._assigned(element, value, line)

    # uses
    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._resolve(_dotted(node))
        if dotted in ("sys.modules", "sys._getframe", "sys._current_frames", "builtins.__dict__"):
            self.add("scan_introspection", dotted, node.lineno)
        if dotted.startswith(("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.CUDAGraph")):
            self.add("scan_streams", dotted, node.lineno)
        if dotted.startswith(("torch.cuda.graph", "torch.cuda.ExternalStream")):
            self.add("scan_streams", dotted, node.lineno)
        if dotted.startswith("os.environ"):
            self.add("scan_io", dotted, node.lineno)
        if node.attr in _LOW_PRECISION and dotted.startswith("torch."):
            self.add("scan_low_precision", dotted, node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = _dotted(node.func)
        resolved = self._resolve(dotted)
        last = dotted.rsplit(".", 1)[-1]
        if resolved in _IO_CALLS or dotted in _IO_CALLS or last in ("read_text", "read_bytes"):
            self.add("scan_io", f"{resolved}(...)", node.lineno)
        if resolved.startswith("os.") and last in {
            c.split(".")[-1] for c in _IO_CALLS if c.startswith("os.")
        }:
            self.add("scan_io", f"{resolved}(...)", node.lineno)
        if last in ("manual_seed", "seed", "manual_seed_all") and "torch" in resolved:
            self.add("scan_seed", f"{resolved}(...)", node.lineno)
        if last in ("set_float32_matmul_precision", "set_num_threads", "set_default_dtype"):
            self.add("scan_numerics_flags", f"{resolved}(...)", node.lineno)
        if last in ("half", "bfloat16") and not node.args:
            self.add("scan_low_precision", f".{last}()", node.lineno)
        if last == "setattr" and node.args:
            target = self._resolve(_dotted(node.args[0]))
            if target.split(".")[0] in ("time", "torch", "sys", "builtins", "kbv", "kbv_native"):
                self.add("scan_monkey_patch", f"setattr({target}, ...)", node.lineno)
        if last in _LIBRARY_CALLS and (
            resolved.startswith("torch") or dotted.startswith(("F.", "torch."))
        ):
            self.add("scan_library_compute", f"{resolved}(...)", node.lineno)
        if resolved.startswith(("gc.", "inspect.")) or resolved in ("sys._getframe",):
            self.add("scan_introspection", f"{resolved}(...)", node.lineno)
        if resolved.endswith(("Thread", "Process", "ThreadPoolExecutor", "ProcessPoolExecutor")):
            self.add("scan_threads", f"{resolved}(...)", node.lineno)
        if last in ("load_inline", "load"):
            for keyword in node.keywords:
                if keyword.arg in ("cpp_sources", "cuda_sources", "sources"):
                    self.source_args.append(keyword.value)
            self.source_args.extend(node.args[1:3])
        self.generic_visit(node)


def _string_constants(node: ast.AST, names: dict[str, dict[str, None]]) -> dict[str, None]:
    """The distinct string constants a value is built from (literals, names of literals, lists,
    `+`, f-strings' literal parts, `.format`/`.replace` receivers), in order of appearance (the
    keys)."""
    out: dict[str, None] = {}
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            out[child.value] = None
        elif isinstance(child, ast.Name) and child.id in names:
            out.update(names[child.id])
    return out


# The depth of Python recursion the scan may use. What Python compiles is what a candidate can
# import, and its parser takes expressions nested a few thousand deep (`a+a+...` with 1,500
# terms compiles); the visitor recurses twice per level, past the default limit of 1,000 from
# about 500 terms, and a scan that failed on it was left out silently. Python calls between
# Python functions do not grow the C stack (3.11 on), so the raised limit is safe for the visit.
_SCAN_RECURSION_LIMIT = 50_000


def _unscannable(reason: str) -> dict[str, Any]:
    return {
        "findings": {
            "scan_error": {
                "severity": "warn",
                "meaning": FINDINGS["scan_error"][1],
                "evidence": [reason],
            }
        },
        "cpp_sources": 0,
        "kernels": [],
        "kernels_never_launched": [],
        "triton_kernels": [],
    }


def scan_source(text: str, filename: str = "<candidate>") -> dict[str, Any]:
    """Findings of one candidate source: {finding: {severity, meaning, evidence}}, and the
    C++ sources found."""
    try:
        # Under the default limit: from 3.11 the parser's C recursion follows it (what compiles
        # parses under it).
        tree = ast.parse(text, filename)
    except SyntaxError as error:
        return _unscannable(f"line {error.lineno}: {error.msg}")
    except (RecursionError, MemoryError):
        return _unscannable("nested too deeply to parse")
    scanner = _Scanner()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _SCAN_RECURSION_LIMIT))
    try:
        scanner.visit(tree)
    except RecursionError:
        return _unscannable("nested too deeply to scan")
    except Exception as error:  # a fault of the scanner's own: said, not a missing scan
        return _unscannable(f"the scan failed: {type(error).__name__}: {error}")
    finally:
        sys.setrecursionlimit(limit)
    sources: list[str] = []
    for node in scanner.source_args:
        sources.extend(_string_constants(node, scanner.strings))
    stripped = [strip_cpp(source) for source in sources]
    gpu = scan_cuda.scan_cuda_sources(stripped)
    for finding, evidence in gpu.findings().items():
        for item in evidence:
            scanner.add(finding, item, 0)
    for code in stripped:
        for match in _CPP_LIBRARY.finditer(code):
            scanner.add("scan_cpp_library_compute", match.group(0).rstrip("( "), 0)
        for match in _CPP_TENSOR_METHOD.finditer(code):
            scanner.add("scan_cpp_library_compute", match.group(0).rstrip("( "), 0)
        for match in _CPP_LOW.finditer(code):
            scanner.add("scan_cpp_low_precision", match.group(0), 0)
    findings = {
        key: {
            "severity": FINDINGS[key][0],
            "meaning": FINDINGS[key][1],
            "evidence": [e.replace("line 0: ", "C++: ") for e in evidence],
        }
        for key, evidence in sorted(scanner.findings.items())
    }
    return {
        "findings": findings,
        "cpp_sources": len(sources),
        # the candidate's own kernels, for telling them from library kernels in the GPU trace
        "kernels": gpu.kernels,
        "kernels_never_launched": gpu.never_launched,
        # its Triton kernels (@triton.jit functions): their GPU kernels carry these names
        "triton_kernels": scanner.triton_kernels,
    }


def scan_file(path: str) -> dict[str, Any]:
    return scan_source(Path(path).read_text(errors="replace"), path)
