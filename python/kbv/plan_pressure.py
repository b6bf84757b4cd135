"""Library plans chosen under memory pressure, seen as they happen.

cuDNN (through PyTorch's v8 API, `Conv_v8.cpp`) picks a convolution's plan at the process's first
call with each key (shapes, dtype, TF32 allowed or not) and keeps it for the process's life. A
plan whose workspace cannot be allocated is skipped for the next one, the out-of-memory
swallowed: a first call made while the device is nearly full (cases resident, a session drawn
ahead under its cap, another process's memory) keeps a plan with less workspace for good, which
may run several times slower. Session 35's audits found reference copies "4.45x faster" than
their own TF32 baseline on `57_conv_transposed_2D`: 4 kernels a call against the baseline's 3,676.
Timed that way, any candidate would be credited with the baseline's loss.

No library says which plan it chose, but the allocator says when it ran out: torch's caching
allocator calls its out-of-memory observers before it throws, also where the caller catches the
error. A forward that saw more out-of-memory events than it raised chose at least one plan
under pressure. `Watch` counts them around every forward of a model that the timing will reuse
(a cached plan whose workspace later cannot be had is searched again and replaced too). The
reference worker chooses its FP32 plans at its first draw beside the TF32 ones, and refuses to go
on once either mode saw such an event (`PlanChosenUnderPressure`: the orchestrator reads it as the
reference out of device memory, a harness fault, and tries the evaluation again with the device
to itself in a new reference process); the candidate's worker reports it (flag
`plans_under_pressure`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .loading import WorkerError

_events = 0  # out-of-memory events the allocator reported in this process
_last: dict[str, int] = {}
_attached = False


class PlanChosenUnderPressure(Exception):
    """What the reference's refusal is raised from: the worker reads it as the device's memory
    running out for a library's plan (`kbv.worker`, memory "library_plan"): a harness fault the
    orchestrator retries alone, unless the candidate held more than its whole evaluation's plan
    (then the candidate's runtime_error, as for any reference out of device memory)."""


def _observe(device: int, alloc: int, limit: int, device_free: int) -> None:
    """torch's allocator calls this (holding the GIL, its own lock released) just before it
    raises OutOfMemoryError: the device, the bytes asked for, the process's limit (the device's
    total, or the cap of set_per_process_memory_fraction) and what the device had free."""
    global _events, _last
    _events += 1
    _last = {
        "device": int(device),
        "bytes": int(alloc),
        "limit_bytes": int(limit),
        "free_bytes": int(device_free),
    }


def attach(device: torch.device) -> bool:
    """Registers the observer once per process (CUDA only; nothing to see on the CPU). Attach
    before the candidate's code is imported: it cannot then replace the function first. A torch
    without the hook, or an allocator that has no observers (cudaMallocAsync), leaves the
    process unwatched (False), never a failure of the forward."""
    global _attached
    if _attached or device.type != "cuda":
        return _attached
    attach_observer = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach_observer is None:
        return False
    try:
        attach_observer(_observe)
    except Exception:  # noqa: BLE001 - an allocator without observers
        return False
    _attached = True
    return True


class Watch:
    """Which numeric modes of one model chose a library plan under memory pressure."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.pressured: dict[str, dict[str, Any]] = {}

    @contextlib.contextmanager
    def forward(self, mode: str, where: str) -> Iterator[None]:
        """Around one forward of the model in `mode` ("tf32", "fp32"): an out-of-memory event
        the forward did not raise was swallowed by a library choosing a plan. One it raised is
        the caller's to handle (an evicting retry); events beyond that one still count."""
        attach(self.device)  # once, before the model's first forward on the device
        before = _events
        raised_oom = False
        try:
            yield
        except BaseException as error:
            raised_oom = _is_out_of_memory(error)
            raise
        finally:
            swallowed = _events - before - (1 if raised_oom else 0)
            if swallowed > 0 and mode not in self.pressured:
                self.pressured[mode] = {"where": where, "events": swallowed, **_last}

    def call(self, mode: str, where: str, fn):
        """`fn` watched call by call, for loops that catch a call's failure themselves (the
        kernel audit): an out-of-memory a call raised is then not taken for a swallowed one.
        Not for timed loops: the window costs each call host time."""

        def watched(*args, **kwargs):
            with self.forward(mode, where):
                return fn(*args, **kwargs)

        return watched

    def words(self, mode: str) -> str | None:
        seen = self.pressured.get(mode)
        if seen is None:
            return None
        return (
            f"{mode.upper()} forward ({seen['where']}) chose a library plan while an allocation "
            f"of {seen.get('bytes', 0) / 2**30:.2f} GiB ran out of device memory "
            f"({seen.get('free_bytes', 0) / 2**30:.2f} GiB free): cuDNN keeps the plan it fell "
            "back to for the process, so its baseline would be timed slower than PyTorch runs "
            "it with room"
        )

    def refuse(self, modes: tuple[str, ...] = ("tf32", "fp32")) -> None:
        """Raises the reference's refusal where any of `modes` chose a plan under pressure."""
        for mode in modes:
            words = self.words(mode)
            if words is not None:
                raise WorkerError(
                    "runtime_error", f"the reference's {words}"
                ) from PlanChosenUnderPressure(words)

    def to_json(self) -> dict[str, Any]:
        return dict(self.pressured)


def _is_out_of_memory(error: BaseException) -> bool:
    """torch's OutOfMemoryError, or an error raised from one (hosting.forward_errors wraps)."""
    from .worker import _links

    return any(type(current).__name__ == "OutOfMemoryError" for current, _ in _links(error))
