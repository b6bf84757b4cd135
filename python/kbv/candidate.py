"""The candidate role: imports the candidate (building its extension), runs its forward on the
cases the reference prepared, and times it. This process never holds a reference module or a
reference output: it only ever sees inputs and parameters."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Any

import torch

from . import (
    devices,
    gpu_guards,
    guards,
    hosting,
    kernel_audit,
    memory,
    numerics,
    params,
    tensorio,
    timing,
)
from .loading import WorkerError, construct, import_file, require


class CandidateRole:
    def __init__(self) -> None:
        # The orchestrator keys the build cache by content and device; this level adds the
        # torch version, which only the worker knows, so no extension built against another
        # torch is ever loaded.
        base = os.environ.get("TORCH_EXTENSIONS_DIR")
        if base:
            os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(base, f"torch-{torch.__version__}")
        self.device = torch.device("cpu")
        self.model: torch.nn.Module | None = None
        self.mapping: dict[str, str] = {}
        self.numerics_baseline: dict[str, Any] = {}
        self.timing_sets: list[list] = []
        self.harness: guards.HarnessSnapshot | None = None
        self.extensions = guards.ExtensionCalls()
        # Every case's inputs stay alive, so no two cases share an address (a cache keyed on
        # data_ptr cannot pass by accident); `kept` names the objects a re-check reuses.
        self.alive: list[list] = []
        self.kept: dict[str, list] = {}

    def cmd_load_candidate(self, request: dict[str, Any]) -> dict[str, Any]:
        self.device = hosting.device_of(request["device"])
        numerics.set_tf32(True)
        self.numerics_baseline = numerics.snapshot()
        gpu_guards.record_clean_l2(self.device)
        self.extensions.install()
        self.harness = guards.HarnessSnapshot()
        started = time.monotonic()
        with _build_cache_lock():
            module = import_file(request["candidate"], "candidate")
        import_seconds = time.monotonic() - started
        model_cls = require(module, "ModelNew", "compile_error", "the candidate")
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise WorkerError("compile_error", "ModelNew is not a torch.nn.Module subclass")
        init_inputs = tensorio.load_inputs(Path(request["init_inputs_path"]), self.device)
        hosting.seeded(hosting.CONSTRUCT_SEED)
        self.model = construct(model_cls, init_inputs, "candidate").to(self.device).eval()
        return {
            "import_seconds": import_seconds,
            "state_spec": params.spec(self.model),
            "persistent_bytes": memory.state_bytes(self.model),
            **self._call_state(l2=False),
            "extension_functions": sorted(self.extensions.counts),
        }

    def cmd_import(self, request: dict[str, Any]) -> dict[str, Any]:
        """Only imports the candidate: builds its extensions into the content-keyed cache, so
        that `kbv run` can build many candidates in parallel ahead of device time."""
        started = time.monotonic()
        with _build_cache_lock():
            import_file(request["candidate"], "candidate")
        return {"import_seconds": time.monotonic() - started}

    def cmd_set_mapping(self, request: dict[str, Any]) -> dict[str, Any]:
        self.mapping = dict(request["mapping"])
        return {}

    def cmd_run_case(self, request: dict[str, Any]) -> dict[str, Any]:
        """One forward on one case: state in, inputs in, outputs out, and what the call did to
        its inputs, to the process's global state and to its outputs after returning.

        `reuse`: the values of `inputs` are written into the tensor objects kept under that
        name (same addresses, `_version` unchanged), as a re-check of output caching; `keep`:
        the inputs are kept under that name for a later re-check."""
        assert self.model is not None
        state = tensorio.load_state(Path(request["state"]), self.device)
        params.load_into(self.model, state, self.mapping)
        inputs = tensorio.load_inputs(Path(request["inputs"]), self.device)
        if request.get("reuse"):
            inputs = _write_into(self.kept[request["reuse"]], inputs)
        self.alive.append(inputs)
        if request.get("keep"):
            self.kept[request["keep"]] = inputs
        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        poisoned = gpu_guards.poison_free_memory(self.device)  # S1/S2: stale memory reads NaN
        started = time.perf_counter()
        # No device-wide wait inside the call: the values at return are copied on the current
        # stream first (T1); the wait comes after, still reported as the forward's failure.
        with hosting.forward_errors():
            result, outputs, at_return, watch = guards.guarded_call(
                lambda: hosting.forward(self.model, inputs, self.device, sync=False),
                lambda r: _bounded(hosting.as_outputs(r)[0], request.get("max_output_bytes")),
                lambda: devices.synchronize(self.device),
            )
        seconds = time.perf_counter() - started
        _, structure = hosting.as_outputs(result)
        mutated = [
            i
            for i, (x, original) in enumerate(zip(inputs, originals, strict=False))
            if isinstance(x, torch.Tensor) and not guards.same_bytes(x, original)
        ]
        aliased = [
            j
            for j, o in enumerate(outputs)
            if isinstance(o, torch.Tensor)
            and any(hosting.shares_storage(o, x) for x in inputs if isinstance(x, torch.Tensor))
        ]
        # The values judged are the ones the forward returned, not what a thread wrote later.
        judged = [
            snap if snap is not None else o for o, snap in zip(outputs, at_return, strict=False)
        ]
        hosting.save_outputs(Path(request["output"]), "candidate", judged)
        return {
            "structure": structure,
            "outputs": [hosting.describe(o) for o in outputs],
            "inputs_mutated": mutated,
            "outputs_aliasing_inputs": aliased,
            "watch": watch,
            "seconds": seconds,
            "poisoned_bytes": poisoned,
            **self._call_state(),
        }

    def cmd_trace(self, request: dict[str, Any]) -> dict[str, Any]:
        """The operators one forward dispatches and the extension functions it calls (`ops`),
        and on CUDA the kernels one more forward launches, with their streams (`gpu`: T1, B1,
        B2). `parts` picks them: the operators are traced before timing (the dispatcher needs
        no CUPTI), the kernels after it (torch.profiler keeps CUPTI's one subscriber slot)."""
        assert self.model is not None
        parts = request.get("parts", ["ops", "gpu"])
        state = tensorio.load_state(Path(request["state"]), self.device)
        params.load_into(self.model, state, self.mapping)
        inputs = tensorio.load_inputs(Path(request["inputs"]), self.device)
        trace: dict[str, Any] = {}
        if "ops" in parts:
            try:
                trace = guards.trace_forward(lambda: self.model(*inputs), self.extensions)
            except Exception as error:  # noqa: BLE001 - a forward that refuses tracing: evidence
                trace = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
        if "gpu" in parts:
            # Fresh copies of the inputs: a cache keyed on the tensors an earlier trace used
            # must not make this forward skip its kernels.
            fresh = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            trace["gpu"] = gpu_guards.kernel_trace(
                lambda: self.model(*fresh), self.device, self.extensions
            )
        trace.update(self._call_state())
        return trace

    def cmd_prepare_timing(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        state = tensorio.load_state(Path(request["state"]), self.device)
        params.load_into(self.model, state, self.mapping)
        self.timing_sets = [tensorio.load_inputs(Path(p), self.device) for p in request["inputs"]]
        return {}

    def cmd_time(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        sets = self.timing_sets
        model = self.model
        last: dict[int, Any] = {}

        def call(i: int) -> Any:
            out = model(*sets[i % len(sets)])
            last[i % len(sets)] = out
            return out

        result = timing.time_calls(
            call,
            self.device,
            request["calls"],
            request["warmup"],
            steady=request.get("steady_warmup", False),
        )
        result.update(self._call_state())
        # The last output of each timing set is judged too (T5, T6: honest when checked, a
        # shortcut when timed).
        saved = []
        for i, path in enumerate(request.get("outputs", [])):
            if i in last:
                outs, _ = hosting.as_outputs(last[i])
                _bounded(outs, request.get("max_output_bytes"))
                if all(isinstance(o, torch.Tensor) for o in outs):
                    hosting.save_outputs(Path(path), "candidate", outs)
                    saved.append(i)
        result["saved_outputs"] = saved
        return result

    def cmd_time_secondary(self, request: dict[str, Any]) -> dict[str, Any]:
        """Host-inclusive and hot back-to-back times (beside the headline)."""
        return self._over_timing_sets(request, timing.secondary_times)

    def cmd_kernel_audit(self, request: dict[str, Any]) -> dict[str, Any]:
        """Kernel span against event time, a few calls under CUPTI kernel records."""
        return self._over_timing_sets(request, kernel_audit.kernel_audit)

    def _over_timing_sets(self, request: dict[str, Any], what) -> dict[str, Any]:
        assert self.model is not None
        sets, model = self.timing_sets, self.model
        result = what(lambda i: model(*sets[i % len(sets)]), self.device, request["calls"])
        result.update(self._call_state(l2=False))
        return result

    def cmd_memory(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        inputs = self.timing_sets[0]
        hosting.forward(self.model, inputs, self.device)
        result = memory.peak_memory(lambda: self.model(*inputs), self.device)
        result["persistent_bytes"] = memory.state_bytes(self.model)
        result["harness_tampered"] = self._harness_changes()
        return result

    def _harness_changes(self) -> list[str]:
        return self.harness.check() if self.harness is not None else []

    def _call_state(self, l2: bool = True) -> dict[str, Any]:
        """What the candidate changed around a call: global numerics flags and harness entry
        points (both put back), and with `l2` the persisting-L2 state (reset)."""
        state = {
            "numerics_changed": self._numerics_changes(),
            "harness_tampered": self._harness_changes(),
        }
        if l2:
            state["l2_persisting"] = gpu_guards.l2_changes(self.device)
        return state

    def _numerics_changes(self) -> dict[str, list[Any]]:
        """Global flags the candidate changed since the worker set them; they are put back so
        a change can only ever be reported, never profited from."""
        now = numerics.snapshot()
        changed = numerics.changes(self.numerics_baseline, now)
        changed.pop("grad_enabled", None)  # no_grad inside forward is legitimate
        if changed:
            numerics.restore(self.numerics_baseline)
        return changed


def _write_into(targets: list, values: list) -> list:
    """Writes `values` into the tensors `targets` in place, leaving their `_version` as it was
    (through `.data`): a cache keyed on address or version sees the old key, new values."""
    for target, value in zip(targets, values, strict=True):
        if isinstance(target, torch.Tensor):
            target.data.copy_(value)
    return [t if isinstance(t, torch.Tensor) else v for t, v in zip(targets, values, strict=True)]


@contextlib.contextmanager
def _build_cache_lock():
    """Serialises imports of the same candidate content (same build-cache folder) across
    processes. torch's own lock lets a second process wait for the first build and then load
    its library; when that build failed there is no library, and the second process would
    report a missing .so instead of the compiler's message. Under this lock it builds (and
    fails) itself."""
    folder = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not folder:
        yield
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, ".kbv-build.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _bounded(outputs: list, limit: int | None) -> list:
    """Refuses (before any copy or file) outputs far larger than the reference's own: a
    multi-GB return must cost its own result, not the disk, memory and time of the run."""
    if limit:
        total = sum(o.numel() * o.element_size() for o in outputs if isinstance(o, torch.Tensor))
        if total > limit:
            raise WorkerError(
                "output_too_large",
                f"the forward returned {total} bytes of output, more than the {limit} bytes "
                "allowed (a multiple of the reference's own outputs); nothing was saved",
            )
    return outputs
