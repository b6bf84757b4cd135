"""Planted: a 256 MiB torch temporary, written and dropped inside the call."""

import torch
from _cuda import MIB


class ModelNew(torch.nn.Module):
    PLANTED_BYTES = 256 * MIB

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty(self.PLANTED_BYTES // 4, device=x.device)
        scratch.fill_(1.0)
        out = x * 2.0
        del scratch
        return out
