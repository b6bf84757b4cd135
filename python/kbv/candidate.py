"""The candidate role: imports the candidate (building its extension), runs its forward on the
cases the reference prepared, and times it. This process never holds a reference module or a
reference output: it only ever sees inputs and parameters."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from . import hosting, measure, numerics, params, tensorio
from .loading import WorkerError, construct, import_file, require


class CandidateRole:
    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.model: torch.nn.Module | None = None
        self.mapping: dict[str, str] = {}
        self.numerics_baseline: dict[str, Any] = {}
        self.timing_sets: list[list] = []

    def cmd_load_candidate(self, request: dict[str, Any]) -> dict[str, Any]:
        self.device = hosting.device_of(request["device"])
        numerics.set_tf32(True)
        self.numerics_baseline = numerics.snapshot()
        started = time.monotonic()
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
            "persistent_bytes": measure.state_bytes(self.model),
            "numerics_changed": self._numerics_changes(),
        }

    def cmd_set_mapping(self, request: dict[str, Any]) -> dict[str, Any]:
        self.mapping = dict(request["mapping"])
        return {}

    def cmd_run_case(self, request: dict[str, Any]) -> dict[str, Any]:
        """One forward on one case: state in, inputs in, outputs out, and what the call did to
        its inputs and to the process's global state."""
        assert self.model is not None
        state = tensorio.load_state(Path(request["state"]), self.device)
        params.load_into(self.model, state, self.mapping)
        inputs = tensorio.load_inputs(Path(request["inputs"]), self.device)
        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        started = time.perf_counter()
        result = hosting.forward(self.model, inputs, self.device)
        seconds = time.perf_counter() - started
        outputs, structure = hosting.as_outputs(result)
        mutated = [
            i
            for i, (x, original) in enumerate(zip(inputs, originals, strict=False))
            if isinstance(x, torch.Tensor) and not _same_bytes(x, original)
        ]
        aliased = [
            j
            for j, o in enumerate(outputs)
            if isinstance(o, torch.Tensor)
            and any(hosting.shares_storage(o, x) for x in inputs if isinstance(x, torch.Tensor))
        ]
        hosting.save_outputs(Path(request["output"]), "candidate", outputs)
        return {
            "structure": structure,
            "outputs": [hosting.describe(o) for o in outputs],
            "inputs_mutated": mutated,
            "outputs_aliasing_inputs": aliased,
            "numerics_changed": self._numerics_changes(),
            "seconds": seconds,
        }

    def cmd_prepare_timing(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        state = tensorio.load_state(Path(request["state"]), self.device)
        params.load_into(self.model, state, self.mapping)
        self.timing_sets = [tensorio.load_inputs(Path(p), self.device) for p in request["inputs"]]
        return {}

    def cmd_time(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        sets = self.timing_sets
        result = measure.time_calls(
            lambda i: self.model(*sets[i % len(sets)]),
            self.device,
            request["calls"],
            request["warmup"],
        )
        result["numerics_changed"] = self._numerics_changes()
        return result

    def cmd_memory(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        inputs = self.timing_sets[0]
        hosting.forward(self.model, inputs, self.device)
        result = measure.peak_memory(lambda: self.model(*inputs), self.device)
        result["persistent_bytes"] = measure.state_bytes(self.model)
        return result

    def _numerics_changes(self) -> dict[str, list[Any]]:
        """Global flags the candidate changed since the worker set them; they are put back so
        a change can only ever be reported, never profited from."""
        now = numerics.snapshot()
        changed = numerics.changes(self.numerics_baseline, now)
        changed.pop("grad_enabled", None)  # no_grad inside forward is legitimate
        if changed:
            numerics.restore(self.numerics_baseline)
        return changed


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe, unlike torch.equal)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)
    )
