import os

import torch
import torch.nn as nn

_LARGE = os.environ.get("KBV_SIZE", "small") == "large"


class Model(nn.Module):
    """Linear layer, elementwise scale by a learned vector, then sigmoid."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.ones(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x * self.scale
        x = torch.sigmoid(x)
        return x


batch_size = 2048 if _LARGE else 32
in_features = 4096 if _LARGE else 128
out_features = 4096 if _LARGE else 64


def get_inputs():
    x = torch.rand(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
