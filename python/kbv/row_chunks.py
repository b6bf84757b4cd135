"""The reference's float64 runs a block of rows at a time, where the forward allows it.

KernelBench's largest problems are a batch of independent rows: an activation over 4096 x 393216
floats (6 GB), a norm or softmax per row, pooling and convolutions over a batch of images. Their
float64 truth was one run over the whole batch: a float64 copy of the inputs (twice their bytes)
and every float64 intermediate of the forward beside the float64 outputs, so the draw's peak was
several times the inputs and a 6 GB problem reserved most of the device (docs/case-path.md).
Computed a chunk of rows at a time into one preallocated float64 output, the truth costs the
outputs plus one chunk's working set.

A forward qualifies when its output rows depend only on the same rows of its inputs. That is
not read from the code: it is shown, once per session, on the first case drawn. The forward
runs in float64 on its first 2c rows at once and on the two halves apart, and the two answers
must agree to float64 rounding (non-finite positions identical). A forward that mixes rows
(batch statistics, a loss over the batch, a view hard-coded to the batch size) differs or fails
there, and its truth stays one run. A problem too small to gain keeps one run without a probe.

Which inputs are split: every floating tensor input whose leading dimension is the batch (the
first floating input's), unless the probe shows the forward mixes their rows; then only the
first, which a matmul's right operand of the same size (a square A @ B) needs, is tried. Integer
tensors pass whole: an index into the batch would point past a chunk (on a GPU, a device-side
assert that ends the worker). Every output must have the batch as its leading dimension.

The probe sees one case. A forward that mixes rows only on some data (a sum over the batch of the
negative part, zero on the first case's `torch.rand`) or at some positions would pass it, so every
run in chunks is checked as well: the last row before a chunk boundary (a different boundary each
run) computed alone must agree with what its chunk gave (two rows across the boundary where
chunks are one row). Where they do not,
that run and every later one of the session go whole. A probe whose outputs are all zero or
mostly not finite says nothing about the rows, and chunks nothing."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

# A chunk's float64 working set (its split inputs in float64, its outputs, and as much again
# for the forward's intermediates). A float64 truth whose whole working set fits in one chunk
# runs whole. KBV_TRUTH_CHUNK_BYTES overrides it (0: always one run), as KBV_CASE_CACHE_BYTES
# does the case budget: the tests chunk small problems with it.
DEFAULT_CHUNK_BYTES = 1 << 30
# Normwise difference between the rows computed together and apart that still counts as the
# same rows: float64 rounding of a reordered reduction is about 1e-16 times the condition; a
# forward that mixes rows differs at order one.
PROBE_TOLERANCE = 1e-9


def chunk_bytes() -> int:
    value = os.environ.get("KBV_TRUTH_CHUNK_BYTES", "")
    if not value:
        return DEFAULT_CHUNK_BYTES
    try:
        return max(0, int(value))
    except ValueError:
        return DEFAULT_CHUNK_BYTES


@dataclass(frozen=True)
class RowPlan:
    """How a float64 run is split: `rows` (the batch) in slices of `chunk_rows`, the inputs
    at `split` sliced along their leading dimension, the others passed whole."""

    rows: int
    chunk_rows: int
    split: tuple[int, ...]

    def slices(self) -> list[slice]:
        return [
            slice(start, min(start + self.chunk_rows, self.rows))
            for start in range(0, self.rows, self.chunk_rows)
        ]

    def holds_for(self, inputs: Sequence[Any]) -> bool:
        """Whether `inputs` have the shapes the plan was made for (its split inputs lead with
        its rows)."""
        return all(
            i < len(inputs) and torch.is_tensor(inputs[i]) and inputs[i].dim() > 0
            and inputs[i].shape[0] == self.rows
            for i in self.split
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "chunk_rows": self.chunk_rows,
            "chunks": len(self.slices()),
            "split_inputs": list(self.split),
        }


def _row_bytes(t: torch.Tensor, rows: int) -> int:
    """Bytes of one row of `t` once in float64 (an integer tensor keeps its own width)."""
    width = 8 if t.is_floating_point() else t.element_size()
    return (t.numel() // max(1, rows)) * width


def candidate_plan(
    inputs: Sequence[Any], outputs: Sequence[torch.Tensor], budget: int
) -> tuple[RowPlan | None, str]:
    """The plan to probe for `inputs` with outputs shaped like `outputs` (the TF32 run's), or
    None and why one run it is. Decided from shapes and sizes only: the probe decides the rest."""
    if budget <= 0:
        return None, "chunking turned off (KBV_TRUTH_CHUNK_BYTES=0)"
    first = next((x for x in inputs if torch.is_tensor(x) and x.is_floating_point()), None)
    if first is None or first.dim() == 0:
        return None, "no floating input with a batch dimension"
    rows = int(first.shape[0])
    split = tuple(
        i
        for i, x in enumerate(inputs)
        if torch.is_tensor(x) and x.is_floating_point() and x.dim() > 0 and x.shape[0] == rows
    )
    per_row = sum(_row_bytes(inputs[i], rows) for i in split)
    # The outputs twice: the chunk's own and its place in the float64 truth being filled.
    per_row += 2 * sum(_row_bytes(o, rows) for o in outputs)
    whole = per_row * rows
    if whole <= budget:
        return None, "fits in one chunk"
    if rows < 2:
        return None, "a batch of one row"
    if any(o.dim() == 0 or o.shape[0] != rows for o in outputs):
        return None, "an output's leading dimension is not the batch"
    # Per row the forward's intermediates are counted as much again as its inputs and outputs.
    chunk_rows = max(1, min(rows // 2, budget // max(1, 2 * per_row)))
    return RowPlan(rows, chunk_rows, split), ""


def run(
    plan: RowPlan,
    inputs: Sequence[Any],
    convert: Callable[[Any], Any],
    forward: Callable[[list], list[torch.Tensor]],
    consume: Callable[[slice, list[torch.Tensor]], None],
) -> None:
    """`forward` over `plan`'s chunks of `inputs`: each split input's rows converted
    (`convert`: to float64, or perturbed) chunk by chunk, the others converted once; each
    chunk's outputs handed to `consume` with their rows, then let go."""
    fixed = {i: convert(x) for i, x in enumerate(inputs) if i not in plan.split}
    for rows in plan.slices():
        chunk = [
            convert(inputs[i][rows]) if i in plan.split else fixed[i] for i in range(len(inputs))
        ]
        outputs = forward(chunk)
        del chunk
        consume(rows, outputs)
        del outputs


def run_into(
    plan: RowPlan,
    inputs: Sequence[Any],
    convert: Callable[[Any], Any],
    forward: Callable[[list], list[torch.Tensor]],
) -> list[torch.Tensor]:
    """`forward` over `plan`'s chunks, its outputs gathered into tensors of the whole batch."""
    gathered: list[torch.Tensor] = []

    def consume(rows: slice, outputs: list[torch.Tensor]) -> None:
        if not gathered:
            for o in outputs:
                shape = (plan.rows, *o.shape[1:])
                gathered.append(torch.empty(shape, dtype=o.dtype, device=o.device))
        if len(outputs) != len(gathered):
            raise ValueError("a chunk's forward returned another number of outputs")
        for whole, o in zip(gathered, outputs, strict=True):
            if o.shape[0] != rows.stop - rows.start or o.shape[1:] != whole.shape[1:]:
                raise ValueError(
                    f"a chunk of {rows.stop - rows.start} rows gave an output of shape "
                    f"{tuple(o.shape)}, not that many rows of {tuple(whole.shape)}"
                )
            whole[rows].copy_(o)

    run(plan, inputs, convert, forward, consume)
    return gathered


def same_rows(together: torch.Tensor, apart: torch.Tensor) -> float | None:
    """The normwise difference of two answers for the same rows (None where they cannot be the
    same: shape, dtype, or non-finite positions differ)."""
    if together.shape != apart.shape or together.dtype != apart.dtype:
        return None
    if not together.is_floating_point():
        return 0.0 if torch.equal(together, apart) else None
    finite = torch.isfinite(together)
    if not torch.equal(finite, torch.isfinite(apart)):
        return None
    if not torch.equal(torch.isnan(together), torch.isnan(apart)):
        return None
    infinite = torch.isinf(together)
    if not torch.equal(together[infinite], apart[infinite]):
        return None
    a = torch.where(finite, together, torch.zeros_like(together)).double()
    b = torch.where(finite, apart, torch.zeros_like(apart)).double()
    scale = float(torch.linalg.vector_norm(a))
    diff = float(torch.linalg.vector_norm(a - b))
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def probe(
    plan: RowPlan,
    inputs: Sequence[Any],
    convert: Callable[[Any], Any],
    forward: Callable[[list], list[torch.Tensor]],
    is_out_of_memory: Callable[[BaseException], bool],
) -> tuple[RowPlan | None, str]:
    """`plan` shown on `inputs`: the forward of the first 2c rows at once against its two halves
    apart (c = the plan's chunk, at most a sixteenth of the batch, at least a row: the probe
    costs 4c rows of forward, once a session). Where the split inputs' rows mix, only the first
    input is tried split. Returns the plan that holds (None: one run) and why not. Running out of
    memory is not an answer about the forward: it propagates."""
    half = max(1, min(plan.chunk_rows, plan.rows // 16))
    tries = [plan.split]
    if len(plan.split) > 1:
        tries.append(plan.split[:1])
    why = ""
    for split in tries:
        sub = [x[: 2 * half] if i in split else x for i, x in enumerate(inputs)]
        try:
            together = forward([convert(x) for x in sub])
            apart = run_into(RowPlan(2 * half, half, split), sub, convert, forward)
        except Exception as error:  # noqa: BLE001 - a forward that cannot take part of a batch
            if is_out_of_memory(error):
                raise
            why = f"the forward on part of the batch failed: {type(error).__name__}: {error}"
            continue
        if len(together) != len(apart):
            why = "the forward on part of the batch returned another number of outputs"
            continue
        if shown := _disagreement(together, apart):
            why = (
                f"rows 0-{2 * half - 1} computed together and as two halves differ (normwise "
                f"{shown}): the forward mixes rows"
            )
            continue
        if not all(_informative(t) for t in together):
            return None, (
                f"rows 0-{2 * half - 1} of the first case are all zero or mostly not finite: "
                "they cannot show that the forward keeps rows apart"
            )
        return RowPlan(plan.rows, plan.chunk_rows, split), ""
    return None, why[:300]


def _informative(t: torch.Tensor) -> bool:
    """Whether an output can show a difference: an integer output always; a floating one where
    at least half its elements are finite and the finite ones are not all zero."""
    if not t.is_floating_point() or t.numel() == 0:
        return True
    finite = torch.isfinite(t)
    if int(finite.sum()) * 2 < t.numel():
        return False
    return bool((t[finite] != 0).any())


def window_differs(
    plan: RowPlan,
    inputs: Sequence[Any],
    convert: Callable[[Any], Any],
    forward: Callable[[list], list[torch.Tensor]],
    gathered: Sequence[torch.Tensor],
    turn: int,
) -> str:
    """The check of one run in chunks: the last row before chunk boundary number `turn` (modulo
    the boundaries) computed alone, against what its chunk gave in `gathered` (rows that mix, or
    a row that depends on its position in the batch, differ). With chunks of one row a row alone
    is what its chunk computed, so there the two rows across the boundary are computed as a
    batch of their own. It costs a forward of 1/B of the batch (2/B with chunks of one row).
    Returns why they differ, or "" where they agree."""
    starts = [rows.start for rows in plan.slices()[1:]]
    boundary = starts[turn % len(starts)]
    window = slice(boundary - 1, boundary + 1 if plan.chunk_rows == 1 else boundary)
    sub = [x[window] if i in plan.split else x for i, x in enumerate(inputs)]
    alone = forward([convert(x) for x in sub])
    if len(alone) != len(gathered):
        return "rows computed alone gave another number of outputs"
    if shown := _disagreement(alone, [g[window] for g in gathered]):
        return (
            f"rows {window.start}-{window.stop - 1} computed alone and in their chunk differ "
            f"(normwise {shown}): the forward mixes rows on this case"
        )
    return ""


def _disagreement(first: Sequence[torch.Tensor], second: Sequence[torch.Tensor]) -> str:
    """ "" where every output of `first` is the same rows as `second`'s (within PROBE_TOLERANCE),
    else each output's normwise difference ("differ" where they cannot be the same)."""
    differences = [same_rows(a, b) for a, b in zip(first, second, strict=True)]
    if all(d is not None and d <= PROBE_TOLERANCE for d in differences):
        return ""
    return ", ".join("differ" if d is None else f"{d:.2e}" for d in differences)
