"""Dynamic checks around the candidate's code, run inside the candidate's worker (threats T2-T4,
B1-B2). They only gather evidence; the orchestrator turns it into flags and verdicts.

- `HarnessSnapshot`: identity of the timing and harness entry points taken before the candidate
  is imported, compared after the import and after every call; a replaced entry point is
  reported and put back (T4). The entry points are a list of library functions (clocks, CUDA
  events, tensor copies) and every binding of every kbv module loaded at that moment.
- `guarded_call`: threads before and after a forward, and the output at return against the
  output after a short wait and after the candidate's new threads ended (T2, lazy outputs).
- `ExtensionCalls`: wraps `torch.utils.cpp_extension.load`/`load_inline` so every function of
  every extension the candidate builds counts its completed calls (B2: a kernel defined but
  never called, or a fallback taken on error).
- `trace_forward`: the aten operators a forward dispatches, with the extension calls and Triton
  launches made meanwhile (B1: the main computation done by PyTorch; no_custom_kernel: none of
  the candidate's own code ran).

These checks share the candidate's process, so a candidate that sets out to defeat them
specifically can; docs/threat-model.md says what is covered and where the boundary is."""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import torch

WAIT_AFTER_RETURN_S = 0.05  # how long an output must stay unchanged after the forward returned
JOIN_TIMEOUT_S = 2.0  # how long the candidate's own threads are given to finish

# Bound before any candidate code runs, so a patched module attribute cannot blind the checks.
_enumerate_threads = threading.enumerate
_sleep = time.sleep
_monotonic = time.monotonic


# -- T4: the harness's entry points -------------------------------------------------------------
def _entry_points() -> list[tuple[str, Any, str]]:
    """(label, owner, attribute) of every function a timing or a check relies on: the library
    functions listed here, and every binding of every kbv module loaded now (`_kbv_bindings`)."""
    import kbv_native

    points: list[tuple[str, Any, str]] = []
    for name in (
        "perf_counter",
        "perf_counter_ns",
        "monotonic",
        "monotonic_ns",
        "time",
        "time_ns",
        "process_time",
        "sleep",
    ):
        points.append((f"time.{name}", time, name))
    for name in ("synchronize", "current_stream", "Event", "Stream", "_sleep", "memory_snapshot"):
        points.append((f"torch.cuda.{name}", torch.cuda, name))
    from torch import profiler

    points.append(("torch.profiler.profile", profiler, "profile"))
    for name in ("elapsed_time", "record", "synchronize", "query"):
        points.append((f"torch.cuda.Event.{name}", torch.cuda.Event, name))
    for name in ("equal", "no_grad", "isfinite", "Tensor"):
        points.append((f"torch.{name}", torch, name))
    for name in (
        "clone",
        "copy_",
        "contiguous",
        "view",
        "reshape",
        "to",
        "detach",
        "cpu",
        "data_ptr",
        "untyped_storage",
        "as_subclass",
        "__eq__",
    ):
        points.append((f"torch.Tensor.{name}", torch.Tensor, name))
    points.append(("threading.enumerate", threading, "enumerate"))
    for name in dir(kbv_native):
        if not name.startswith("_"):
            points.append((f"kbv_native.{name}", kbv_native, name))
    # The shared blocks: opened through these, and the outputs copied into the slot with copy_.
    points.append(("torch.from_dlpack", torch, "from_dlpack"))
    import socket

    points.append(("socket.recv_fds", socket, "recv_fds"))
    for module in _kbv_modules().values():
        points.extend(_kbv_bindings(module))
    return points


def _kbv_modules() -> dict[str, types.ModuleType]:
    """Every kbv module loaded now (the candidate's own module is `kbv_candidate_...`, not one
    of them). Walked rather than listed, so a harness module added later is covered without
    anyone remembering to add it here."""
    return {
        name: module
        for name, module in sorted(sys.modules.items())
        if (name == "kbv" or name.startswith("kbv.")) and isinstance(module, types.ModuleType)
    }


_PROTECTED_KINDS = (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)
_MEMBER_KINDS = (types.FunctionType, staticmethod, classmethod, property)


def _kbv_bindings(module: types.ModuleType) -> list[tuple[str, Any, str]]:
    """The names of a kbv module that its code looks up at run time and that no harness code
    rebinds: functions, classes and modules (its own and those it imported: replacing
    `kbv.memory.warm_tracer` or `kbv.timing.kbv_native` redirects the harness as surely as
    replacing the original), constants (UPPER_CASE), and the methods of the classes it defines.
    Lower-case data (`_synchronizes`, `_first_call`) is state the harness updates itself."""
    points: list[tuple[str, Any, str]] = []
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        if not (isinstance(value, _PROTECTED_KINDS) or name.isupper()):
            continue
        points.append((f"{module.__name__}.{name}", module, name))
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in vars(value).items():
                if isinstance(member, _MEMBER_KINDS):
                    points.append((f"{module.__name__}.{name}.{attr}", value, attr))
    return points


class HarnessSnapshot:
    """Identity of every entry point; `check()` lists what changed and puts the originals back."""

    def __init__(self) -> None:
        self.points = [
            (label, owner, attr, _raw(owner, attr)) for label, owner, attr in _entry_points()
        ]
        self.modules = {
            name: sys.modules.get(name)
            for name in ("time", "torch", "torch.cuda", "threading", "kbv_native")
            + tuple(_kbv_modules())
        }

    def check(self) -> list[str]:
        changed = []
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                changed.append(f"sys.modules[{name!r}]")
                sys.modules[name] = module
        for label, owner, attr, original in self.points:
            if _raw(owner, attr) is not original:
                changed.append(label)
                try:
                    setattr(owner, attr, original)
                except (AttributeError, TypeError):  # immutable owner: cannot have changed
                    pass
        return changed


def _raw(owner: Any, attr: str) -> Any:
    """The attribute as stored (a class's own dict entry: staticmethods and descriptors are
    compared as objects, not through a fresh bound method)."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in vars(klass):
                return vars(klass)[attr]
        return None
    return getattr(owner, attr, None)


# -- T2: threads and outputs that change after return -------------------------------------------
def _native_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _snapshot(outputs: list[Any]) -> list[torch.Tensor | None]:
    copies = []
    for o in outputs:
        if type(o) is torch.Tensor:
            copies.append(o.detach().clone())
        else:
            copies.append(None)
    return copies


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe, unlike torch.equal)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)
    )


def guarded_call(
    call: Callable[[], Any],
    to_list: Callable[[Any], list[Any]],
    sync: Callable[[], None],
    snapshot: Callable[[list[Any]], list[torch.Tensor | None]] = _snapshot,
) -> tuple[Any, list[Any], list[torch.Tensor | None], dict[str, Any]]:
    """Runs `call`, then watches its outputs: the values at return (copied on the current
    stream by `snapshot`, before a device sync: into the shared output slot, which the
    reference judges) are the ones judged; a thread the call left running and any later
    change to the outputs are reported.
    Returns (result, outputs, values at return, report)."""
    before = set(_enumerate_threads())
    native_before = _native_threads()
    result = call()
    # Looked at the moment the call returned, before anything else can let them finish.
    new_threads = [t for t in _enumerate_threads() if t not in before and t.is_alive()]
    native_after = _native_threads()
    outputs = to_list(result)
    # Copied before any device-wide wait: on CUDA the copies are queued on the current stream
    # only, so they see what that stream's events would see; work left running on another
    # stream (T1) is not waited for and shows up as an output that changes afterwards.
    at_return = snapshot(outputs)
    sync()
    _sleep(WAIT_AFTER_RETURN_S)
    deadline = _monotonic() + JOIN_TIMEOUT_S
    for t in new_threads:
        t.join(max(0.0, deadline - _monotonic()))
    sync()
    changed = [
        i
        for i, (o, snap) in enumerate(zip(outputs, at_return, strict=False))
        if snap is not None and not same_bytes(o, snap)
    ]
    report = {
        "threads_left_running": [t.name for t in new_threads],
        "threads_still_alive": [t.name for t in new_threads if t.is_alive()],
        "native_threads": [native_before, native_after],
        "outputs_changed_after_return": changed,
    }
    return result, outputs, at_return, report


# -- B2: which extension functions ran ----------------------------------------------------------
class ExtensionCalls:
    """Counts completed calls of every function of every extension built through
    torch.utils.cpp_extension while installed (installed before the candidate is imported)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.modules: list[str] = []

    def install(self) -> None:
        import torch.utils.cpp_extension as cpp

        for name in ("load", "load_inline"):
            original = getattr(cpp, name)

            @functools.wraps(original)
            def loader(*args, _original=original, **kwargs):
                module = _original(*args, **kwargs)
                if isinstance(module, types.ModuleType):
                    self.wrap(module)
                return module

            setattr(cpp, name, loader)

    def wrap(self, module: types.ModuleType) -> None:
        self.modules.append(module.__name__)
        for attr in dir(module):
            if attr.startswith("_"):
                continue
            value = getattr(module, attr)
            if callable(value) and not isinstance(value, type):
                label = f"{module.__name__}.{attr}"
                self.counts.setdefault(label, 0)
                setattr(module, attr, self._counting(label, value))

    def _counting(self, label: str, function: Callable) -> Callable:
        counts = self.counts

        @functools.wraps(function)
        def counted(*args, **kwargs):
            out = function(*args, **kwargs)
            counts[label] += 1
            return out

        return counted

    def total(self) -> int:
        return sum(self.counts.values())


# -- B1: what the forward dispatched ------------------------------------------------------------
class TritonLaunches:
    """Counts the Triton kernels launched while entered: `kernel[grid](...)`, autotuners and
    heuristics all launch through `triton.runtime.jit.JITFunction.run`, which is wrapped on the
    class for the duration (warm-ups are not launches). Triton kernels do not pass through the
    dispatcher, so without this a Triton candidate would look like one that ran none of its own
    code. Only where the candidate imported Triton itself: kbv never imports it."""

    def __init__(self) -> None:
        self.count = 0
        self._owner: Any = None
        self._original: Any = None

    def __enter__(self) -> TritonLaunches:
        jit = sys.modules.get("triton.runtime.jit")
        owner = getattr(jit, "JITFunction", None) if jit is not None else None
        original = vars(owner).get("run") if isinstance(owner, type) else None
        if original is None:
            return self

        @functools.wraps(original)
        def run(fn_self, *args, **kwargs):
            if not kwargs.get("warmup", False):
                self.count += 1
            return original(fn_self, *args, **kwargs)

        self._owner, self._original = owner, original
        owner.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owner is not None:
            self._owner.run = self._original


def trace_forward(call: Callable[[], Any], extensions: ExtensionCalls | None) -> dict[str, Any]:
    """The aten (and custom-namespace) operators dispatched during `call`, in order of first
    use with counts, the extension functions called meanwhile, and the Triton kernels launched
    (`jit_launches`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: dict[str, int] = {}
    dynamo_loaded = "torch._dynamo" in sys.modules

    class Recorder(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # By default torch wraps __torch_dispatch__ in torch._dynamo.disable, which imports
            # torch._dynamo at the first traced operator: 4-10 s of CPU per worker. In a
            # process that has not imported torch._dynamo nothing is compiled, so the wrapper
            # would protect nothing; where it is loaded (a candidate using torch.compile), the
            # wrapper stays.
            return dynamo_loaded

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            schema = getattr(func, "_schema", None)
            name = schema.name if schema is not None else str(func)
            ops[name] = ops.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    before = dict(extensions.counts) if extensions else {}
    with torch.no_grad(), TritonLaunches() as triton, Recorder():
        call()
    called = {}
    if extensions:
        called = {
            k: v - before.get(k, 0) for k, v in extensions.counts.items() if v > before.get(k, 0)
        }
    return {
        "ops": ops,
        "extension_calls": called,
        "extension_functions": sorted(extensions.counts) if extensions else [],
        "jit_launches": triton.count,
    }
