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
under pressure. `Watch` counts them; the reference worker refuses to time a baseline whose
numeric mode saw one (the evaluation is retried with the device to itself), and a session
drawn ahead under its cap that saw one is drawn again rather than used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

_events = 0  # out-of-memory events the allocator reported in this process
_last: dict[str, int] = {}
_attached = False


def _observe(device: int, alloc: int, device_allocated: int, device_free: int) -> None:
    """torch's allocator calls this (holding the GIL) just before it raises OutOfMemoryError."""
    global _events, _last
    _events += 1
    _last = {"device": int(device), "bytes": int(alloc), "free_bytes": int(device_free)}


def attach(device: torch.device) -> bool:
    """Registers the observer once per process (CUDA only; nothing to see on the CPU)."""
    global _attached
    if _attached or device.type != "cuda":
        return _attached
    attach_observer = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach_observer is None:
        return False
    attach_observer(_observe)
    _attached = True
    return True


def events() -> int:
    return _events


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

    def words(self, mode: str) -> str | None:
        seen = self.pressured.get(mode)
        if seen is None:
            return None
        return (
            f"its {mode.upper()} forward ({seen['where']}) chose a library plan while an "
            f"allocation of {seen.get('bytes', 0) / 2**30:.2f} GiB ran out of device memory "
            f"({seen.get('free_bytes', 0) / 2**30:.2f} GiB free): cuDNN keeps the plan it fell "
            "back to for the process, so this baseline would be timed slower than PyTorch runs "
            "it with room"
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.pressured)


def _is_out_of_memory(error: BaseException) -> bool:
    current: BaseException | None = error
    for _ in range(8):
        if current is None:
            return False
        if type(current).__name__ == "OutOfMemoryError":
            return True
        current = current.__cause__ or current.__context__
    return False
