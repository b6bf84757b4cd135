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

A first call on a full device is thus refused and its evaluation run again alone, which stops
the device's other evaluations. Each mode's first forward in the reference therefore gets room
first (`Watch.make_room`): where the device has less free than `room_bytes` (and the forward's
own peak, where known), that much is allocated and freed into the process's allocator cache,
where the plan's workspace is then found; the room is given back after that forward. Measured on
the H100 (session 38, docs/results/h100-2026-12-07-s38): 57_conv_transposed_2D's first call with
3 GB free kept the FP32 fallback (30.3 ms, 26 events); with an 8 GiB block cached first, the
clean plan (8.8 ms against 8.2, the same kernels). Session 37 read 58_conv_transposed_3D's slow
baseline as a plan dropped before any allocation, with no event; on torch 2.11 a squeezed first
call raised events on both shapes probed, so that reading is not borne out.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .loading import WorkerError

_events = 0  # out-of-memory events the allocator reported in this process
_last: dict[str, int] = {}
_attached = False


# The room a mode's first forward gets for a library's plan: the most any of KernelBench's 126
# problems with a convolution held beyond its output at a first call in a clean process was
# 8.0 GiB (76_conv_standard_1D_dilated_strided__; median 0.27 GiB; docs/results/
# h100-2026-12-07-s38, conv_workspace_survey.py), with a margin, and never more than an eighth
# of the device.
ROOM_BYTES = 9 << 30
ROOM_SHARE = 0.125


def room_bytes(total: int | None = None) -> int:
    """The room a first call gets on a device of `total` bytes (None: not known yet, as at a
    load that leaves the device untouched); KBV_PLAN_ROOM_BYTES overrides."""
    override = os.environ.get("KBV_PLAN_ROOM_BYTES")
    if override:
        return int(override)
    return ROOM_BYTES if total is None else min(ROOM_BYTES, int(total * ROOM_SHARE))


class DeviceMemory:
    """What `Watch.make_room` asks of the device (apart, so the host's tests can be the device)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def free_and_total(self) -> tuple[int, int]:
        free, total = torch.cuda.mem_get_info(self.device)
        return int(free), int(total)

    def cache_block(self, nbytes: int) -> None:
        """`nbytes` allocated and freed: kept in the allocator's cache, its largest block. The
        allocation would stand as the process's peak: the counters start again from here."""
        block = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        del block
        torch.cuda.reset_peak_memory_stats(self.device)

    def give_back(self) -> None:
        torch.cuda.empty_cache()


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
    """Which numeric modes of one model chose a library plan under memory pressure, and the room
    each mode's first forward had.

    `room`: each mode's first forward gets room (the reference's, whose first draw the memory
    ledger reserves it for; a candidate's first call is not reserved any, and its squeeze is
    seen by the events and timed again alone). `before_room`: called before room is set aside,
    which starts the allocator's peak counters again (a caller measuring a peak across it carries
    its figure first). `extra_bytes`: the forward's own peak where the caller knows it (its
    outputs and intermediates take their share of the cached block before a plan's workspace is
    asked for)."""

    def __init__(
        self,
        device: torch.device,
        room: bool = False,
        before_room: Callable[[], None] | None = None,
        memory: DeviceMemory | None = None,
    ) -> None:
        self.device = device
        self.room = room
        self.pressured: dict[str, dict[str, Any]] = {}
        self.first_calls: dict[str, dict[str, Any]] = {}
        self.extra_bytes = 0
        self._before_room = before_room
        self._memory = memory or DeviceMemory(device)
        self._room_held = False

    def make_room(self, mode: str, where: str) -> bool:
        """Before `mode`'s first forward on a GPU: room for its library plans (the module's
        docstring); True where a block was set aside (given back after the next forward). Where
        it cannot be set aside (a session drawn ahead under its cap, a device others fill), the
        forward goes on as it would have: a plan it then cannot allocate is an out-of-memory
        event the forward's window counts (measured: 26 on 57_conv_transposed_2D's first call
        with 3 GB free), so the want of room is recorded, never refused by itself."""
        if not self.room or mode in self.first_calls or self.device.type != "cuda":
            return False
        free, total = self._memory.free_and_total()
        need = room_bytes(total) + max(0, int(self.extra_bytes))
        record = {"where": where, "room_bytes": need, "free_bytes": free, "set_aside": False}
        self.first_calls[mode] = record
        if free >= need:
            return False
        if self._before_room is not None:
            self._before_room()
        try:
            self._memory.cache_block(need)
        except torch.OutOfMemoryError:
            # The allocator's own event, before any forward's window: not a plan's.
            record["no_room"] = True
            return False
        record["set_aside"] = True
        self._room_held = True
        return True

    @contextlib.contextmanager
    def forward(self, mode: str, where: str) -> Iterator[None]:
        """Around one forward of the model in `mode` ("tf32", "fp32"): an out-of-memory event
        the forward did not raise was swallowed by a library choosing a plan. One it raised is
        the caller's to handle (an evicting retry); events beyond that one still count."""
        attach(self.device)  # once, before the model's first forward on the device
        self.make_room(mode, where)
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
            if self._room_held:
                self._room_held = False
                self._memory.give_back()

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

    def rooms_json(self) -> dict[str, Any]:
        """The room each mode's first forward had (the result's record of it)."""
        return {mode: dict(record) for mode, record in self.first_calls.items()}


def _is_out_of_memory(error: BaseException) -> bool:
    """torch's OutOfMemoryError, or an error raised from one (hosting.forward_errors wraps)."""
    from .worker import _links

    return any(type(current).__name__ == "OutOfMemoryError" for current, _ in _links(error))
