"""Input families: the native draws and the hidden families H1-H4 of the verified protocol, and
the scaled families of the published KernelBench-Verified protocol.

Every draw starts from the problem's own `get_inputs()` (under a seed), so shapes, dtypes and
integer domains are the problem's; float tensors are then re-drawn from the family's law.
Integer and bool tensors (class targets, indices, masks) keep their native values: they stay
integer and in range. A float tensor that is non-negative natively keeps that support when the
reference shows the op needs it (the `nonnegative` set passed in by the caller)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch

FAMILIES = ("native", "h1_native", "h2_mixed_sign", "h3_wide_range", "h4_special")
PAPER_SCALES = {"paper_x1": 1.0, "paper_x3": 3.0, "paper_x0.01": 0.01, "paper_neg1": -1.0}
PUBLIC_SEED = 42  # KernelBench's own seed: the public, non-secret inputs


def derive_seed(secret: str, *parts: object) -> int:
    """A 63-bit seed derived from the secret run seed and a label; the secret never leaves."""
    digest = hashlib.sha256("/".join([secret, *map(str, parts)]).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def native_inputs(get_inputs: Callable[[], list], seed: int) -> list:
    """The problem's own generator under `seed` (it draws from torch's global RNG)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        inputs = get_inputs()
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    return list(inputs)


def is_float(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _scale(tensor: torch.Tensor) -> float:
    """The native magnitude (RMS), so hidden draws stay in the problem's own units."""
    if tensor.numel() == 0:
        return 1.0
    rms = float(tensor.double().pow(2).mean().sqrt())
    return rms if rms > 1e-6 else 1.0


def _randn(like: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(like.shape, generator=gen, dtype=torch.float64, device=like.device)


def _rand(like: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(like.shape, generator=gen, dtype=torch.float64, device=like.device)


def _ensure_both_signs(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    flat = x.reshape(-1)
    if flat.numel() >= 2 and ((flat > 0).all() or (flat < 0).all()):
        count = max(1, flat.numel() // 20)
        index = torch.randperm(flat.numel(), generator=gen, device=x.device)[:count]
        flat[index] = -flat[index]
    return flat.reshape(x.shape)


def mixed_sign(like: torch.Tensor, draw: int, gen: torch.Generator) -> torch.Tensor:
    """H2: both signs, non-zero mean, asymmetric range; the third law has a large offset."""
    sigma = _scale(like)
    mean, positive_gain, negative_gain = [(0.5, 1.0, 0.6), (-1.5, 0.4, 1.3), (8.0, 1.0, 1.0)][
        draw % 3
    ]
    x = _randn(like, gen)
    x = torch.where(x > 0, x * positive_gain, x * negative_gain) + mean
    return _ensure_both_signs(x * sigma, gen)


def wide_range(like: torch.Tensor, draw: int, gen: torch.Generator, mildness: int = 0):
    """H3: log-normal magnitudes far from 1 in both directions, random signs, rare spikes.

    `mildness` narrows the law when the reference itself overflows on a draw (the draw is then
    replaced, and the replacement reported)."""
    sigma = _scale(like)
    log_spread = [2.0, 3.0, 2.5][draw % 3] / (2**mildness)
    magnitude = torch.exp(_randn(like, gen) * log_spread)
    sign = torch.where(_rand(like, gen) < 0.5, -1.0, 1.0)
    x = sign * magnitude
    if draw % 3 != 0:
        spikes = _rand(like, gen) < 1e-3
        x = torch.where(spikes, x * (10.0 ** (3 - mildness)), x)
    return x * sigma


def special(like: torch.Tensor, native: torch.Tensor, draw: int, gen: torch.Generator, first: bool):
    """H4: structured and special values: mixed batches, zero rows, ties and repeats, constant
    rows, values near 1, and (third law) an all-zero first input."""
    sigma = _scale(like)
    x = mixed_sign(like, 0, gen)
    rows = x.reshape(-1, x.shape[-1]) if x.dim() >= 2 else x.reshape(1, -1)
    n = rows.shape[0]
    kind = draw % 3
    if kind == 0:  # a mixed batch: chunks of native, zeros, constant rows, near-one rows
        native_rows = native.to(torch.float64).reshape(rows.shape)
        bounds = [round(n * k / 5) for k in range(6)]
        if n >= 5:
            rows[bounds[0] : bounds[1]] = native_rows[bounds[0] : bounds[1]]
            rows[bounds[1] : bounds[2]] = 0.0
            rows[bounds[2] : bounds[3]] = _randn(rows[bounds[2] : bounds[3], :1], gen) * sigma
            rows[bounds[3] : bounds[4]] = 1.0 + 0.01 * _randn(rows[bounds[3] : bounds[4]], gen)
        else:
            columns = rows.shape[1]
            rows[:, : columns // 4] = 0.0
            rows[:, columns // 4 : columns // 2] = 1.0 + 0.01 * _randn(
                rows[:, columns // 4 : columns // 2], gen
            )
    elif kind == 1:  # ties and repeats from a handful of levels, and every 7th row zero
        levels = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], dtype=torch.float64)
        pick = torch.randint(0, len(levels), rows.shape, generator=gen, device=rows.device)
        rows.copy_(levels.to(rows.device)[pick] * sigma)
        rows[::7] = 0.0
    else:  # all zeros for the first float input, constant rows for the others
        if first:
            rows.zero_()
        else:
            rows.copy_(_randn(rows[:, :1], gen).expand_as(rows) * sigma)
    return rows.reshape(like.shape)


def hidden_inputs(
    family: str,
    draw: int,
    template: list,
    gen: torch.Generator,
    nonnegative: set[int],
    mildness: int = 0,
) -> list:
    """Re-draws the float tensors of `template` (a native draw under a secret seed)."""
    if family == "h1_native":
        return template
    out = []
    first_float = True
    for index, value in enumerate(template):
        if not is_float(value):
            out.append(value)
            continue
        if family == "h2_mixed_sign":
            x = mixed_sign(value, draw, gen)
        elif family == "h3_wide_range":
            x = wide_range(value, draw, gen, mildness)
        elif family == "h4_special":
            x = special(value, value, draw, gen, first_float)
        else:
            raise ValueError(f"unknown family {family}")
        first_float = False
        if index in nonnegative:
            x = x.abs()
        out.append(x.to(value.dtype).contiguous())
    return out


def paper_inputs(family: str, template: list) -> list:
    """The published KernelBench-Verified transforms: native inputs scaled x1, x3, x0.01, x-1."""
    factor = PAPER_SCALES[family]
    return [v * factor if is_float(v) else v for v in template]


def nonnegative_indices(template: list) -> set[int]:
    return {i for i, v in enumerate(template) if is_float(v) and v.numel() and bool((v >= 0).all())}
