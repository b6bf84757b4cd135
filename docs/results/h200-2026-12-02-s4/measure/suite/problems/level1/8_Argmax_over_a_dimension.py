import os

import torch
import torch.nn as nn

_LARGE = os.environ.get("KBV_SIZE", "small") == "large"


class Model(nn.Module):
    """Argmax over one dimension (the dimension is removed; int64 indices)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


batch_size = 64 if _LARGE else 8
dim1 = 1024 if _LARGE else 64
dim2 = 1024 if _LARGE else 64


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [1]
