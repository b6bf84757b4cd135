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


def redraw(value: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Fresh values with the tensor's own first two moments; constant tensors (ones, zeros)
    get spread around their constant so they stop being an identity. Non-negative tensors
    (variances, scales that must stay positive) keep their sign."""
    v = value.detach().to(torch.float64)
    noise = torch.randn(v.shape, generator=gen, dtype=torch.float64, device=v.device)
    mean = float(v.mean()) if v.numel() else 0.0
    std = float(v.std()) if v.numel() > 1 else 0.0
    nonnegative = v.numel() > 0 and bool((v >= 0).all()) and bool((v > 0).any())
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
    again is the same case, bit for bit (its sensitivity is measured from such a private draw)."""
    state = {}
    for name, tensor in initial.items():
        if name in names and tensor.is_floating_point():
            state[name] = redraw(tensor, gen).contiguous()
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
