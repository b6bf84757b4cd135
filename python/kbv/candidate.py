"""The candidate role: imports the candidate (building its extension), runs its forward on the
cases the reference shares, and times it. This process never holds a reference module or a
reference output: it only ever sees inputs, parameters and the slot its outputs go into."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import time
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
    plan_pressure,
    shared,
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
        self.timing_blocks: list[shared.Block] = []
        self.harness: guards.HarnessSnapshot | None = None
        self.extensions = guards.ExtensionCalls()
        # The block the outputs are copied into (the reference judges it); the input blocks a
        # re-check reuses by name (same tensor objects, same addresses).
        self.slot: shared.Block | None = None
        self.kept: dict[str, shared.Block] = {}
        self.last: dict[int, Any] = {}
        # Every case's input tensor objects stay alive (their memory is unmapped after the
        # case), so no two cases' inputs share a Python id or an address: a cache keyed on them
        # misses on every plain case and is caught by the re-checks as `output_cached`, rather
        # than hitting by accident on the next case.
        self.alive: list[list] = []
        # Library plans its forward chose while an allocation ran out of device memory (a
        # cuDNN plan with less workspace, kept for the process): reported, never judged.
        self.plans = plan_pressure.Watch(self.device)

    def cmd_load_candidate(self, request: dict[str, Any]) -> dict[str, Any]:
        laps = hosting.Laps(process_start=hosting.WORKER_READY_S)
        self.device = hosting.device_of(request["device"])
        self.plans = plan_pressure.Watch(self.device)
        plan_pressure.attach(self.device)  # before the candidate's code can replace the hook
        numerics.set_tf32(True)
        self.numerics_baseline = numerics.snapshot()
        gpu_guards.record_clean_l2(self.device)
        self.extensions.install()
        self.harness = guards.HarnessSnapshot()
        laps.lap("guards")
        started = time.monotonic()
        with _build_cache_lock():
            laps.lap("build_lock")
            module = import_file(request["candidate"], "candidate")
        import_seconds = time.monotonic() - started
        laps.lap("import")
        model_cls = require(module, "ModelNew", "compile_error", "the candidate")
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise WorkerError("compile_error", "ModelNew is not a torch.nn.Module subclass")
        init_inputs = shared.decode_values(request["init_inputs"])
        hosting.seeded(hosting.CONSTRUCT_SEED)
        model = construct(model_cls, init_inputs, "candidate")
        laps.lap("construct")
        self.model = model.to(self.device).eval()
        laps.lap("to_device")
        return {
            "load_phases_s": laps.seconds,
            "import_seconds": import_seconds,
            "state_spec": params.spec(self.model),
            "persistent_bytes": memory.state_bytes(self.model),
            **self._call_state(l2=False),
            "extension_functions": sorted(self.extensions.counts),
            "extension_files": self.extensions.files,
        }

    def cmd_import(self, request: dict[str, Any]) -> dict[str, Any]:
        """Only imports the candidate: builds its extensions into the content-keyed cache, so
        that `kbv run` can build many candidates in parallel ahead of device time."""
        started = time.monotonic()
        self.extensions.install()
        with _build_cache_lock():
            import_file(request["candidate"], "candidate")
        return {
            "import_seconds": time.monotonic() - started,
            "extension_files": self.extensions.files,
        }

    def cmd_set_mapping(self, request: dict[str, Any]) -> dict[str, Any]:
        self.mapping = dict(request["mapping"])
        return {}

    def cmd_attach_slot(self, request: dict[str, Any]) -> dict[str, Any]:
        """The shared block the outputs of every checked call are copied into."""
        fds = request.get("fds_received", [])
        self.slot = shared.open_from(request["slot"], fds, self.device)
        return {}

    def cmd_run_case(self, request: dict[str, Any]) -> dict[str, Any]:
        """One forward on one case: state in, inputs in (shared blocks), outputs copied into
        the slot at return, and what the call did to the process's global state and to its
        outputs after returning. Input mutation is the reference's to see (checksums).

        `reuse`: the inputs are the tensor objects of the block with that token, kept from an
        earlier call, into which the reference has written new values (same addresses,
        `_version` unchanged): a re-check of output caching; `keep`: the inputs are kept for
        it. Other input blocks are unmapped after the call (their addresses stay reserved)."""
        assert self.model is not None
        fds = request.get("fds_received", [])
        if request.get("reuse"):
            block = self.kept[request["reuse"]]
        else:
            block = shared.open_from(request["inputs"], fds, self.device)
        self._load_state(request.get("state"), fds)
        inputs = block.as_list()
        self.alive.append(inputs)
        # S1/S2: stale memory reads NaN. Not on the run the orchestrator asks to see unpoisoned
        # (`poison: false`): a forward that computes only when its fresh buffer reads NaN, and
        # serves stale or cached values otherwise, must meet a checked call like a timed one:
        # free memory then holds finite garbage, as it does between timed calls.
        if request.get("poison", True):
            poisoned = gpu_guards.poison_free_memory(self.device)
        else:
            poisoned = gpu_guards.poison_free_memory(self.device, gpu_guards.stale_byte())
        started = time.perf_counter()
        try:
            # No device-wide wait inside the call: the values at return are copied on the
            # current stream first (T1); the wait comes after, still the forward's failure.
            with hosting.forward_errors(), self.plans.forward("forward", "a checked call"):
                result, outputs, at_return, watch = guards.guarded_call(
                    lambda: hosting.forward(self.model, inputs, self.device, sync=False),
                    lambda r: hosting.as_outputs(r)[0],
                    lambda: devices.synchronize(self.device),
                    self._into_slot,
                )
            seconds = time.perf_counter() - started
            _, structure = hosting.as_outputs(result)
            aliased = [
                j
                for j, o in enumerate(outputs)
                if isinstance(o, torch.Tensor)
                and any(hosting.shares_storage(o, x) for x in inputs if torch.is_tensor(x))
            ]
            return {
                "structure": structure,
                "outputs": [hosting.describe(o) for o in outputs],
                "copied": [snap is not None for snap in at_return],
                "outputs_aliasing_inputs": aliased,
                "watch": watch,
                "seconds": seconds,
                "poisoned_bytes": poisoned,
                **self._call_state(),
            }
        finally:
            if request.get("keep"):
                self.kept[block.token] = block
            else:
                # A kept block serves one same-buffers run; then it goes like any other, or its
                # memory (a whole case's inputs) would stay mapped here until the worker ends.
                self.kept.pop(request.get("reuse", ""), None)
                block.revoke()

    def _load_state(self, layout: dict[str, Any] | None, fds: list[int]) -> None:
        if layout is None:
            return
        assert self.model is not None
        state = shared.open_from(layout, fds, self.device)
        try:
            params.load_into(self.model, state.as_dict(), self.mapping)
            devices.synchronize(self.device)
        finally:
            state.revoke()

    def _into_slot(self, outputs: list[Any]) -> list[torch.Tensor | None]:
        """Copies each output that matches the reference's contract (a plain tensor of the
        same dtype and shape) into the slot, on the current stream; None for the others
        (the orchestrator reports why from their description)."""
        copies: list[torch.Tensor | None] = []
        slot = self.slot.as_list() if self.slot is not None else []
        for i, o in enumerate(outputs):
            target = slot[i] if i < len(slot) else None
            if (
                type(o) is torch.Tensor
                and target is not None
                and o.dtype == target.dtype
                and o.shape == target.shape
                and o.device == target.device
            ):
                target.copy_(o.detach(), non_blocking=True)
                copies.append(target)
            else:
                copies.append(None)
        return copies

    def cmd_trace(self, request: dict[str, Any]) -> dict[str, Any]:
        """The operators one forward dispatches and the extension functions it calls (`ops`),
        and on CUDA the kernels one more forward launches, with their streams (`gpu`: T1, B1,
        B2). `parts` picks them: the operators are traced before timing (the dispatcher needs
        no CUPTI), the kernels after it (torch.profiler keeps CUPTI's one subscriber slot)."""
        assert self.model is not None
        parts = request.get("parts", ["ops", "gpu"])
        fds = request.get("fds_received", [])
        block = shared.open_from(request["inputs"], fds, self.device)
        self._load_state(request.get("state"), fds)
        inputs = block.as_list()
        trace: dict[str, Any] = {}
        try:
            if "ops" in parts:
                try:
                    trace = guards.trace_forward(lambda: self.model(*inputs), self.extensions)
                except Exception as error:  # noqa: BLE001 - a forward that refuses tracing
                    trace = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
            if "gpu" in parts:
                # Fresh copies of the inputs: a cache keyed on the tensors an earlier trace
                # used must not make this forward skip its kernels.
                fresh = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
                trace["gpu"] = gpu_guards.kernel_trace(
                    lambda: self.model(*fresh), self.device, self.extensions
                )
        finally:
            block.revoke()
        trace.update(self._call_state())
        return trace

    def cmd_prepare_timing(self, request: dict[str, Any]) -> dict[str, Any]:
        """The timing inputs (the reference's own blocks: both sides are timed on the same
        memory) and the initial state."""
        assert self.model is not None
        fds = request.get("fds_received", [])
        for block in self.timing_blocks:
            block.revoke()
        self.timing_blocks = [
            shared.open_from(layout, fds, self.device) for layout in request["sets"]
        ]
        self._load_state(request.get("state"), fds)
        self.timing_sets = [b.as_list() for b in self.timing_blocks]
        self.last = {}
        return {}

    def cmd_end_timing(self, request: dict[str, Any]) -> dict[str, Any]:
        for block in self.timing_blocks:
            block.revoke()
        self.timing_blocks, self.timing_sets, self.last = [], [], {}
        return {}

    def cmd_time(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        sets = self.timing_sets
        model = self.model
        last = self.last

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
        result["last_outputs"] = sorted(last)
        return result

    def cmd_emit_timed_output(self, request: dict[str, Any]) -> dict[str, Any]:
        """The last output of timing set `index` copied into the slot, to be judged too (T5,
        T6: honest when checked, a shortcut when timed)."""
        index = int(request["index"])
        if index not in self.last:
            return {"copied": [], "outputs": [], "structure": None}
        devices.synchronize(self.device)
        outs, structure = hosting.as_outputs(self.last[index])
        copied = self._into_slot(outs)
        devices.synchronize(self.device)
        return {
            "structure": structure,
            "outputs": [hosting.describe(o) for o in outs],
            "copied": [c is not None for c in copied],
        }

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
        if self.plans.pressured:
            state["plans_under_pressure"] = self.plans.to_json()
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
        # torch's own build lock is a file (FileBaton): a build killed half-way (a timeout, a
        # killed run) leaves it behind, and every later import of the same candidate would then
        # wait for it until the compile timeout. Under this flock no other import of this
        # folder runs, so any such file is stale.
        for stale in glob.glob(os.path.join(folder, "*", "lock")):
            with contextlib.suppress(OSError):
                os.remove(stale)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
