"""No planted allocation: the baseline every planted figure is read against (the output)."""

import torch


class ModelNew(torch.nn.Module):
    PLANTED_BYTES = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0
