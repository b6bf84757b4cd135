"""Tensors shared between the reference's and the candidate's workers without files
(docs/case-path.md): a block of shared memory (`kbv_native.SharedArena`: a CUDA VMM allocation
exported as a file descriptor on a GPU, a memfd on the CPU) holds the tensors of one case's
inputs or state at aligned offsets; the block's *layout* (a JSON object) says where each value
is. The reference creates every block; the candidate only opens what it is sent."""

from __future__ import annotations

import ast
import itertools
import os
from typing import Any

import torch

ALIGN = 512  # bytes: what cudaMalloc gives, so vectorised loads of a candidate's kernel work
_tokens = itertools.count(1)


def native():
    import kbv_native

    return kbv_native


def device_index(device: torch.device) -> int:
    """kbv_native's device argument: -1 for host memory, the CUDA ordinal otherwise."""
    if device.type == "cuda":
        return device.index if device.index is not None else torch.cuda.current_device()
    return -1


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_of(name: str) -> torch.dtype:
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Block:
    """One shared block and the tensors viewed in it. `values` follows the layout's entries:
    tensors are views of the block, other values (ints, floats) are kept as given."""

    def __init__(self, arena, layout: dict[str, Any], values: list[Any], keys: list[Any]):
        self.arena = arena
        self.layout = layout
        self.values = values
        self.keys = keys

    @property
    def token(self) -> str:
        return self.layout["token"]

    def as_list(self) -> list[Any]:
        return list(self.values)

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self.keys, self.values, strict=True))

    def tensors(self) -> list[tuple[Any, torch.Tensor]]:
        return [(k, v) for k, v in zip(self.keys, self.values, strict=True) if _is_tensor(v)]

    def export_fd(self) -> int | None:
        return self.arena.export_fd() if self.arena is not None else None

    def revoke(self) -> None:
        """Unmaps the block in this process but keeps its addresses reserved: no later block
        gets them, and a thread left running that touches them faults. Work queued on the
        device that reads the block ends first: unmapping under a running kernel is an illegal
        address in this process's context, which would end it."""
        self.values = [None if _is_tensor(v) else v for v in self.values]
        if self.arena is not None:
            _drain(self.arena)
            self.arena.revoke()

    def close(self) -> None:
        self.values = [None if _is_tensor(v) else v for v in self.values]
        if self.arena is not None:
            _drain(self.arena)
            self.arena.close()
            self.arena = None


def _drain(arena) -> None:
    if arena.device >= 0:
        torch.cuda.synchronize(arena.device)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def new_arena(nbytes: int, device: torch.device):
    """A SharedArena of `nbytes` on `device`. On a GPU it is a VMM allocation the driver makes
    (cuMemCreate), which cannot use what torch's caching allocator holds freed: where the driver
    says it is out of memory, the cache goes back to the device and the allocation is tried
    once more. Without this, `2_ShallowWideMLP` (8.6 GB of weights) ran out drawing a state
    block with 40 GiB free in torch's cache, alone on an 80 GB H100 (session 25)."""
    try:
        return native().SharedArena(nbytes, device_index(device))
    except RuntimeError as error:
        if device.type != "cuda" or "OUT_OF_MEMORY" not in str(error):
            raise
    torch.cuda.synchronize(device)  # blocks freed on the stream are cached once their work ends
    torch.cuda.empty_cache()
    return native().SharedArena(nbytes, device_index(device))


def allocate(like: list[Any] | dict[str, Any], device: torch.device, copy: bool = True) -> Block:
    """A new block holding tensors shaped like the tensors of `like` (a list: by position; a
    dict: by name); with `copy`, their values are copied in. Non-tensor values go into the
    layout as Python literals."""
    keys = list(like.keys()) if isinstance(like, dict) else list(range(len(like)))
    values = list(like.values()) if isinstance(like, dict) else list(like)
    entries, offset = [], 0
    for key, value in zip(keys, values, strict=True):
        if _is_tensor(value):
            entries.append(
                {
                    "key": key,
                    "dtype": dtype_name(value.dtype),
                    "shape": list(value.shape),
                    "offset": offset,
                    "nbytes": nbytes(value),
                }
            )
            offset += -(-nbytes(value) // ALIGN) * ALIGN
        else:
            entries.append({"key": key, "literal": repr(value)})
    layout = {"token": f"b{os.getpid()}-{next(_tokens)}", "nbytes": offset, "entries": entries}
    arena = new_arena(offset, device) if offset > 0 else None
    block = Block(arena, layout, *_views(arena, entries, device))
    if copy:
        for target, value in zip(block.values, values, strict=True):
            if _is_tensor(value):
                target.copy_(value)
        # The copies run on this process's stream; another process that maps the block sees
        # none of its ordering. A block is handed over complete: without this wait a candidate
        # given a fresh 17 GB copy (the determinism re-check at KernelBench's sizes) read it
        # half-written and was rejected `nondeterministic` (H200, session 11).
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return block


def open_from(layout: dict[str, Any], fds: list[int], device: torch.device) -> Block:
    """Opens a block whose descriptor is the next of `fds` (a block of no bytes has none)."""
    return open_block(layout, fds.pop(0) if layout["nbytes"] > 0 and fds else None, device)


def open_block(layout: dict[str, Any], fd: int | None, device: torch.device) -> Block:
    """Opens a block another process shared (its layout and one descriptor). The descriptor is
    closed here whatever happens."""
    try:
        arena = None
        if layout["nbytes"] > 0:
            if fd is None:
                raise ValueError(f"block {layout['token']} came without its descriptor")
            arena = native().SharedArena.open(fd, layout["nbytes"], device_index(device))
        return Block(arena, layout, *_views(arena, layout["entries"], device))
    finally:
        if fd is not None:
            os.close(fd)


def _views(arena, entries: list[dict[str, Any]], device: torch.device):
    values, keys = [], []
    for entry in entries:
        keys.append(entry["key"])
        if "literal" in entry:
            values.append(ast.literal_eval(entry["literal"]))
            continue
        dtype = dtype_of(entry["dtype"])
        if entry["nbytes"] == 0:
            values.append(torch.empty(entry["shape"], dtype=dtype, device=device))
            continue
        view = arena.view(entry["offset"], entry["dtype"], entry["shape"])
        values.append(torch.from_dlpack(view))
    return values, keys


def encode_values(values: list[Any]) -> list[dict[str, Any]]:
    """Small non-tensor values (a problem's init inputs) for the JSON channel."""
    out = []
    for value in values:
        if _is_tensor(value):
            raise ValueError("tensors travel in shared blocks, not as literals")
        out.append({"literal": repr(value)})
    return out


def decode_values(encoded: list[dict[str, Any]]) -> list[Any]:
    return [ast.literal_eval(e["literal"]) for e in encoded]
