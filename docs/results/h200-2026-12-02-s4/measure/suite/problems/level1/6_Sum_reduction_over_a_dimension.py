import os

import torch
import torch.nn as nn

_LARGE = os.environ.get("KBV_SIZE", "small") == "large"


class Model(nn.Module):
    """Sum reduction over one dimension, keeping it (size 1)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 64 if _LARGE else 8
dim1 = 1024 if _LARGE else 64
dim2 = 1024 if _LARGE else 64
reduce_dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
