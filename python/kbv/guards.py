"""Dynamic checks around the candidate's code, run inside the candidate's worker (threats T2-T4,
B1-B2). They only gather evidence; the orchestrator turns it into flags and verdicts.

- `HarnessSnapshot`: identity of the timing and harness entry points taken before the candidate
  is imported, compared after the import and after every call; a replaced entry point is
  reported and put back (T4). The entry points are a list of library functions (clocks, CUDA
  events, tensor copies), every binding of every kbv module loaded at that moment and of the
  standard modules the worker's channel goes through (json, os, socket); for a Python function
  its body too (`__code__`, defaults, closure cells: swapping them keeps the identity), and below
  Python kbv_native's own integrity record (its GOT, its code, the vDSO's clock).
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
import hashlib
import os
import secrets
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
_sha256 = hashlib.sha256
_randbits = secrets.randbits


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
    # What the worker's answers go through (the channel's json.dumps and os.write): replacing
    # them would rewrite every answer after kbv composed it.
    for name in _LIBRARY_MODULES:
        module = sys.modules.get(name)
        if isinstance(module, types.ModuleType):
            points.extend(_kbv_bindings(module, members_of_all=True))
    return points


_LIBRARY_MODULES = ("json", "json.encoder", "json.decoder", "os", "posix", "socket")


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


def _kbv_bindings(
    module: types.ModuleType, members_of_all: bool = False
) -> list[tuple[str, Any, str]]:
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
        if isinstance(value, type) and (value.__module__ == module.__name__ or members_of_all):
            for attr, member in vars(value).items():
                if isinstance(member, _MEMBER_KINDS):
                    points.append((f"{module.__name__}.{name}.{attr}", value, attr))
    return points


class HarnessSnapshot:
    """Identity of every entry point, and the body of every Python function among them;
    `check()` lists what changed and puts the originals back."""

    def __init__(self) -> None:
        self.points = [
            (label, owner, attr, _raw(owner, attr)) for label, owner, attr in _entry_points()
        ]
        self.bodies = [
            (label, function, _body(function))
            for label, _, _, original in self.points
            for function in _functions_of(original)
        ]
        self.modules = {
            name: sys.modules.get(name)
            for name in ("time", "torch", "torch.cuda", "threading", "kbv_native")
            + tuple(_kbv_modules())
            + _LIBRARY_MODULES
        }
        self.native = sys.modules.get("kbv_native")

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
        for label, function, body in self.bodies:
            parts = _changed_body(function, body)
            if parts:
                changed.extend(f"{label}.{part}" for part in parts)
                _restore_body(function, body)
        # Below Python: kbv_native's GOT, its code and the vDSO's clock (kbv_native checks
        # them itself, also between timed samples, and puts back what it can).
        integrity = getattr(self.native, "integrity_changes", None)
        if integrity is not None:
            changed.extend(f"native: {what}" for what in integrity())
        return changed


def _functions_of(value: Any) -> list[types.FunctionType]:
    """The Python functions behind an entry point (a function, a static or class method's, a
    property's accessors)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return [
            f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)
        ]
    return [value] if isinstance(value, types.FunctionType) else []


def _cells(function: types.FunctionType) -> tuple:
    out = []
    for cell in function.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:  # an empty cell
            out.append(_EMPTY)
    return tuple(out)


_EMPTY = object()


def _body(function: types.FunctionType) -> tuple:
    """What a function does, apart from its identity: its code object, its defaults and the
    objects its closure cells hold (each can be replaced in place)."""
    return (function.__code__, function.__defaults__, function.__kwdefaults__, _cells(function))


def _changed_body(function: types.FunctionType, body: tuple) -> list[str]:
    code, defaults, kwdefaults, cells = body
    parts = []
    if function.__code__ is not code:
        parts.append("__code__")
    if function.__defaults__ is not defaults:
        parts.append("__defaults__")
    if function.__kwdefaults__ is not kwdefaults:
        parts.append("__kwdefaults__")
    now = _cells(function)
    if len(now) != len(cells) or any(a is not b for a, b in zip(now, cells, strict=False)):
        parts.append("__closure__")
    return parts


def _restore_body(function: types.FunctionType, body: tuple) -> None:
    code, defaults, kwdefaults, cells = body
    try:
        function.__code__ = code
        function.__defaults__ = defaults
        function.__kwdefaults__ = kwdefaults
        for cell, value in zip(function.__closure__ or (), cells, strict=False):
            if value is _EMPTY:
                del cell.cell_contents
            else:
                cell.cell_contents = value
    except (AttributeError, TypeError, ValueError):  # reported; putting back is best effort
        pass


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


def fingerprint(t: torch.Tensor, key: int) -> int:
    """A keyed checksum of a plain contiguous tensor's bytes (kbv_native's), taken on the current
    stream: what it holds now, to be compared with what it holds later."""
    import kbv_native

    if not t.is_contiguous():
        t = t.contiguous()
    if t.device.type == "cuda":
        index = t.device.index if t.device.index is not None else torch.cuda.current_device()
        device, stream = index, torch.cuda.current_stream(t.device).cuda_stream
    else:
        device, stream = -1, 0
    return int(kbv_native.checksum(t.data_ptr(), t.numel() * t.element_size(), device, key, stream))


def guarded_call(
    call: Callable[[], Any],
    to_list: Callable[[Any], list[Any]],
    sync: Callable[[], None],
    snapshot: Callable[[list[Any]], list[torch.Tensor | None]] = _snapshot,
) -> tuple[Any, list[Any], list[torch.Tensor | None], dict[str, Any]]:
    """Runs `call`, then watches its outputs: the values at return (copied on the current
    stream by `snapshot`, before a device sync: into the shared output slot, which the
    reference judges) are the ones judged; a thread the call left running and any later
    change to the outputs are reported, and so is any later write into the copies themselves
    (a thread that finds the slot and writes what it computed after the return into both).
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
    # The copies' contents at once, on the same stream (a fresh key per call: nothing to learn).
    key = _randbits(63)
    marks = [fingerprint(snap, key) if snap is not None else None for snap in at_return]
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
    rewritten = [
        i
        for i, (snap, mark) in enumerate(zip(at_return, marks, strict=False))
        if snap is not None and fingerprint(snap, key) != mark
    ]
    report = {
        "threads_left_running": [t.name for t in new_threads],
        "threads_still_alive": [t.name for t in new_threads if t.is_alive()],
        "native_threads": [native_before, native_after],
        "outputs_changed_after_return": sorted(set(changed) | set(rewritten)),
        "copies_rewritten_after_return": rewritten,
    }
    return result, outputs, at_return, report


# -- B2: which extension functions ran ----------------------------------------------------------
class ExtensionCalls:
    """Counts completed calls of every function of every extension built through
    torch.utils.cpp_extension while installed (installed before the candidate is imported), and
    records each library loaded that way as it was the moment torch loaded it: path, inode,
    size and SHA-256. The orchestrator compares the files with that record after the candidate's
    worker has ended (a library swapped in the build cache after it was loaded)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.modules: list[str] = []
        self.files: dict[str, dict[str, Any]] = {}

    def install(self) -> None:
        import torch.utils.cpp_extension as cpp

        for name in ("load", "load_inline"):
            original = getattr(cpp, name)

            @functools.wraps(original)
            def loader(*args, _original=original, **kwargs):
                module = _original(*args, **kwargs)
                if isinstance(module, types.ModuleType):
                    self.record_file(module)
                    self.wrap(module)
                return module

            setattr(cpp, name, loader)

    def record_file(self, module: types.ModuleType) -> None:
        """The library behind `module` as loaded: the file at its path now (hashed before any
        code of the candidate's runs again) and the inode the process mapped."""
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or path in self.files:
            return
        record: dict[str, Any] = {"module": module.__name__}
        try:
            path = os.path.realpath(path)
            with open(path, "rb") as handle:
                digest = _sha256()
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
                stat = os.fstat(handle.fileno())
            record.update(sha256=digest.hexdigest(), size=stat.st_size, inode=stat.st_ino)
            mapped = _mapped_inode(path)
            if mapped is not None and mapped != stat.st_ino:
                record["mapped_inode"] = mapped  # already replaced under the loaded library
        except OSError as error:
            record["error"] = str(error)
        self.files[path] = record

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


def _mapped_inode(path: str) -> int | None:
    """The inode of `path` as this process mapped it (/proc/self/maps)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].strip() in (path, path + " (deleted)"):
                    return int(fields[4])
    except (OSError, ValueError):
        return None
    return None


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
