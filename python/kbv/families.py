"""Input families: the native draws and the hidden families H1-H4 of the verified protocol, and
the scaled families of the published KernelBench-Verified protocol.

Every draw starts from the problem's own `get_inputs()` (under a seed), so shapes, dtypes and
integer domains are the problem's; float tensors are then re-drawn from the family's law.
Integer and bool tensors (class targets, indices, masks) keep their native values: they stay
integer and in range. A float tensor that is non-negative natively keeps that support when the
reference shows the op needs it (the `nonnegative` set passed in by the caller).

The laws are computed in float64 but chunk by chunk, written straight into the destination
tensor (the case's shared arena): KernelBench's inputs reach 17 GB, and a float64 copy of one,
let alone the several temporaries a law needs, would not fit beside it. Chunks are a fixed
number of elements, so a draw is the same for the same seed whatever the device memory. A law
works in place in a few chunk-sized float64 buffers made once per tensor: on the host a fresh
128 MiB temporary is a new mapping faulted in page by page, and the six a chunk took were half
of a 2 GiB draw's time on the CPU."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch

FAMILIES = ("native", "h1_native", "h2_mixed_sign", "h3_wide_range", "h4_special")
PAPER_SCALES = {"paper_x1": 1.0, "paper_x3": 3.0, "paper_x0.01": 0.01, "paper_neg1": -1.0}
PUBLIC_SEED = 42  # KernelBench's own seed: the public, non-secret inputs
CHUNK = 1 << 24  # elements per float64 block (128 MiB)


def derive_seed(secret: str, *parts: object) -> int:
    """A 63-bit seed derived from the secret run seed and a label; the secret never leaves."""
    digest = hashlib.sha256("/".join([secret, *map(str, parts)]).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def native_inputs(
    get_inputs: Callable[[], list], seed: int, device: torch.device | None = None
) -> list:
    """The problem's own generator under `seed` (it draws from torch's global RNG). With
    `device`, its factory calls create their tensors there directly: KernelBench's inputs are
    drawn with `torch.rand(...)` on the host, and a 17 GB host draw copied over is what the
    device path must avoid."""
    devices = [device] if device is not None and device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        if device is not None:
            with torch.device(device):
                inputs = get_inputs()
        else:
            inputs = get_inputs()
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    values = list(inputs)
    if device is not None:  # a problem that named a device itself
        values = [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]
    return values


def is_float(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _blocks(t: torch.Tensor):
    """Flat views of `t` (contiguous) CHUNK elements at a time."""
    flat = t.reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        yield flat[start : start + CHUNK]


def _work(t: torch.Tensor, count: int = 1) -> list[torch.Tensor]:
    """`count` float64 buffers of one block of `t` (CHUNK elements, fewer for a small tensor),
    reused block after block."""
    size = max(1, min(CHUNK, t.numel()))
    return [torch.empty(size, dtype=torch.float64, device=t.device) for _ in range(count)]


def rms(t: torch.Tensor) -> float:
    """Root mean square in float64, one block at a time (no float64 copy of the tensor)."""
    if t.numel() == 0:
        return 0.0
    total = 0.0
    (work,) = _work(t)
    for block in _blocks(t.contiguous()):
        square = work[: block.numel()]
        total += float(square.copy_(block).square_().sum())
    return (total / t.numel()) ** 0.5


def _scale(tensor: torch.Tensor) -> float:
    """The native magnitude (RMS), so hidden draws stay in the problem's own units."""
    value = rms(tensor)
    return value if value > 1e-6 else 1.0


def all_finite(t: torch.Tensor) -> bool:
    if not t.is_floating_point() or t.numel() == 0:
        return True
    return all(bool(torch.isfinite(block).all()) for block in _blocks(t.contiguous()))


def _randn(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    return torch.randn(n, generator=gen, dtype=torch.float64, device=device)


def _fill(out: torch.Tensor, law: Callable[..., torch.Tensor], buffers: int = 1) -> torch.Tensor:
    """Writes a law's float64 values into `out` block by block: `law(*work)` fills the first of
    its `buffers` work buffers (each cut to the block's size) and answers it."""
    work = _work(out, buffers)
    for block in _blocks(out):
        block.copy_(law(*(w[: block.numel()] for w in work)))
    return out


def _scalar(value: float, device: torch.device) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64, device=device)


def _ensure_both_signs(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Flips about 5% of the elements of a tensor that holds one sign only (in place)."""
    flat = x.reshape(-1)
    if flat.numel() >= 2 and (float(flat.min()) > 0 or float(flat.max()) < 0):
        count = max(1, flat.numel() // 20)
        # Indices drawn with replacement: a permutation of a 4e9-element tensor is 32 GB.
        index = torch.randint(0, flat.numel(), (count,), generator=gen, device=x.device)
        flat[index] = -flat[index]
    return x


def mixed_sign(out: torch.Tensor, sigma: float, draw: int, gen: torch.Generator) -> torch.Tensor:
    """H2: both signs, non-zero mean, asymmetric range; the third law has a large offset."""
    mean, positive_gain, negative_gain = [(0.5, 1.0, 0.6), (-1.5, 0.4, 1.3), (8.0, 1.0, 1.0)][
        draw % 3
    ]
    positive, negative = _scalar(positive_gain, out.device), _scalar(negative_gain, out.device)

    def law(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        # (x > 0 ? x * positive_gain : x * negative_gain) + mean, times sigma: in place.
        torch.randn(x.numel(), generator=gen, dtype=torch.float64, device=x.device, out=x)
        torch.where(x > 0, positive, negative, out=gain)
        return x.mul_(gain).add_(mean).mul_(sigma)

    return _ensure_both_signs(_fill(out, law, buffers=2), gen)


def wide_range(
    out: torch.Tensor, sigma: float, draw: int, gen: torch.Generator, mildness: int = 0
) -> torch.Tensor:
    """H3: log-normal magnitudes far from 1 in both directions, random signs, rare spikes.

    `mildness` narrows the law when the reference itself overflows on a draw (the draw is then
    replaced, and the replacement reported)."""
    log_spread = [2.0, 3.0, 2.5][draw % 3] / (2**mildness)
    one, minus_one = _scalar(1.0, out.device), _scalar(-1.0, out.device)
    spike = _scalar(10.0 ** (3 - mildness), out.device)

    def law(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
        # exp(randn * log_spread), negated where a uniform is below 0.5, times 10^(3 - mildness)
        # where another is below 1e-3 (laws 1 and 2), times sigma: in place, the same draws.
        n = x.numel()
        torch.randn(n, generator=gen, dtype=torch.float64, device=x.device, out=x)
        x.mul_(log_spread).exp_()
        torch.rand(n, generator=gen, dtype=torch.float64, device=x.device, out=factor)
        x.mul_(torch.where(factor < 0.5, minus_one, one, out=factor))
        if draw % 3 != 0:
            torch.rand(n, generator=gen, dtype=torch.float64, device=x.device, out=factor)
            x.mul_(torch.where(factor < 1e-3, spike, one, out=factor))
        return x.mul_(sigma)

    return _fill(out, law, buffers=2)


def _row_blocks(rows: torch.Tensor, start: int, stop: int):
    """Row ranges of `rows[start:stop]` holding about CHUNK elements each."""
    step = max(1, CHUNK // max(1, rows.shape[1]))
    for first in range(start, stop, step):
        yield rows[first : min(stop, first + step)]


def special(
    out: torch.Tensor,
    native: torch.Tensor,
    sigma: float,
    draw: int,
    gen: torch.Generator,
    first: bool,
) -> torch.Tensor:
    """H4: structured and special values: mixed batches, zero rows, ties and repeats, constant
    rows, values near 1, and (third law) an all-zero first input."""
    mixed_sign(out, sigma, 0, gen)
    rows = out.reshape(-1, out.shape[-1]) if out.dim() >= 2 else out.reshape(1, -1)
    n = rows.shape[0]
    kind = draw % 3
    device = out.device
    if kind == 0:  # a mixed batch: chunks of native, zeros, constant rows, near-one rows
        native_rows = native.reshape(rows.shape)
        bounds = [round(n * k / 5) for k in range(6)]
        if n >= 5:
            rows[bounds[0] : bounds[1]] = native_rows[bounds[0] : bounds[1]]
            rows[bounds[1] : bounds[2]] = 0.0
            constant = _randn(bounds[3] - bounds[2], gen, device).unsqueeze(1) * sigma
            rows[bounds[2] : bounds[3]] = constant.to(out.dtype)
            work = None  # one float64 buffer of the first (largest) row block, reused
            for block in _row_blocks(rows, bounds[3], bounds[4]):
                if work is None:
                    work = torch.empty(block.numel(), dtype=torch.float64, device=device)
                near = work[: block.numel()]
                torch.randn(
                    near.numel(), generator=gen, dtype=torch.float64, device=device, out=near
                )
                block.copy_(near.mul_(0.01).add_(1.0).view(block.shape))  # 1 + 0.01 * randn
        else:
            columns = rows.shape[1]
            rows[:, : columns // 4] = 0.0
            near_one = rows[:, columns // 4 : columns // 2]
            near_one.copy_(1.0 + 0.01 * _randn(near_one.numel(), gen, device).view(near_one.shape))
    elif kind == 1:  # ties and repeats from a handful of levels, and every 7th row zero
        levels = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], dtype=torch.float64, device=device)
        for block in _row_blocks(rows, 0, n):
            pick = torch.randint(0, len(levels), block.shape, generator=gen, device=device)
            block.copy_(levels[pick] * sigma)
        rows[::7] = 0.0
    else:  # all zeros for the first float input, constant rows for the others
        if first:
            rows.zero_()
        else:
            rows.copy_((_randn(n, gen, device).unsqueeze(1) * sigma).to(out.dtype).expand_as(rows))
    return out


def hidden_inputs(
    family: str,
    draw: int,
    template: list,
    gen: torch.Generator,
    nonnegative: set[int],
    mildness: int = 0,
    into: list | None = None,
) -> list:
    """Re-draws the float tensors of `template` (a native draw under a secret seed), into the
    tensors of `into` where given (same shapes and dtypes: the case's arena), else into new
    ones. Non-float values are the template's own."""
    if family == "h1_native":
        return template
    out = []
    first_float = True
    for index, value in enumerate(template):
        if not is_float(value):
            out.append(value)
            continue
        target = into[index] if into is not None else torch.empty_like(value).contiguous()
        sigma = _scale(value)
        if family == "h2_mixed_sign":
            mixed_sign(target, sigma, draw, gen)
        elif family == "h3_wide_range":
            wide_range(target, sigma, draw, gen, mildness)
        elif family == "h4_special":
            special(target, value, sigma, draw, gen, first_float)
        else:
            raise ValueError(f"unknown family {family}")
        first_float = False
        if index in nonnegative:
            target.abs_()
        out.append(target)
    return out


def paper_inputs(family: str, template: list) -> list:
    """The published KernelBench-Verified transforms: native inputs scaled x1, x3, x0.01, x-1."""
    factor = PAPER_SCALES[family]
    return [v * factor if is_float(v) else v for v in template]


def nonnegative_indices(template: list) -> set[int]:
    return {i for i, v in enumerate(template) if is_float(v) and v.numel() and float(v.min()) >= 0}
