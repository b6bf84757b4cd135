"""Module state: re-drawing parameters and buffers to non-identity values for the hidden
families, and loading the reference's state into a candidate by name and shape.

Why re-draw: a kernel that drops a multiply by a scale initialised to ones, or a bias
initialised to zeros, is exact on the problem's own initial weights (threat S10)."""

from __future__ import annotations

import torch
from torch import nn


def state_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and persistent buffers by their state_dict names."""
    return {name: t for name, t in module.state_dict(keep_vars=True).items()}


def spec(module: nn.Module) -> dict[str, dict]:
    return {
        name: {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
        for name, t in state_tensors(module).items()
    }


def moments(tensors: list[torch.Tensor]) -> list[tuple[float, float, bool]]:
    """Each tensor's mean, standard deviation and whether it is non-negative and not all zero
    (in float64), read back in one transfer per device: a model's state is hundreds of tensors,
    and a read per figure waited for the device four times a tensor (on a GPU other processes
    share, a time slice each: DenseNet201's 619 tensors took 4-6 s a case in session 27's H100
    audit)."""
    rows: list[torch.Tensor] = []
    for value in tensors:
        v = value.detach().to(torch.float64)
        zero = v.new_zeros(())
        mean = v.mean() if v.numel() else zero
        std = v.std() if v.numel() > 1 else zero
        nonnegative = ((v >= 0).all() & (v > 0).any()).to(torch.float64) if v.numel() else zero
        rows.append(torch.stack([mean, std, nonnegative]))
    table: list[list[float] | None] = [None] * len(rows)
    for device in {row.device for row in rows}:
        at = [k for k, row in enumerate(rows) if row.device == device]
        for k, figures in zip(at, torch.stack([rows[k] for k in at]).tolist(), strict=True):
            table[k] = figures
    return [(mean, std, bool(nonnegative)) for mean, std, nonnegative in table]


def redraw(
    value: torch.Tensor,
    gen: torch.Generator,
    figures: tuple[float, float, bool] | None = None,
) -> torch.Tensor:
    """Fresh values with the tensor's own first two moments; constant tensors (ones, zeros)
    get spread around their constant so they stop being an identity. Non-negative tensors
    (variances, scales that must stay positive) keep their sign. `figures`: the tensor's
    moments() where they were taken already."""
    v = value.detach().to(torch.float64)
    noise = torch.randn(v.shape, generator=gen, dtype=torch.float64, device=v.device)
    mean, std, nonnegative = figures if figures is not None else moments([value])[0]
    if std > 1e-6 * max(abs(mean), 1e-12):
        new = mean + std * noise
    elif nonnegative:  # a positive constant such as a ones-initialised scale or running_var
        new = mean * torch.exp(0.5 * noise)
    else:  # zeros (biases, running means) or a negative constant
        new = mean + max(abs(mean), 0.1) * noise
    if nonnegative:
        new = new.abs()
    return new.to(value.dtype)


def redrawn_state(
    initial: dict[str, torch.Tensor], names: set[str], gen: torch.Generator
) -> dict[str, torch.Tensor]:
    """Fresh values for the tensors named in `names`, with the moments of the reference's own
    construction (`initial`), never of whatever a previous draw left in the model: a case drawn
    again is the same case, bit for bit (its sensitivity is measured from such a private draw).
    The moments of all of them are read at once; the noise is drawn tensor by tensor in the
    state's order, as it always was."""
    drawn = [n for n, t in initial.items() if n in names and t.is_floating_point()]
    figures = dict(zip(drawn, moments([initial[n] for n in drawn]), strict=True))
    state = {}
    for name, tensor in initial.items():
        if name in figures:
            state[name] = redraw(tensor, gen, figures[name]).contiguous()
        else:
            state[name] = tensor.detach().clone().contiguous()
    return state


@torch.no_grad()
def load_into(module: nn.Module, state: dict[str, torch.Tensor], mapping: dict[str, str]) -> None:
    """Copies the reference state into the candidate in place (keeps the candidate's own
    tensor objects, devices and layouts), so `_version` changes as a real update would."""
    targets = state_tensors(module)
    for reference_name, candidate_name in mapping.items():
        if reference_name in state:
            targets[candidate_name].copy_(state[reference_name])
