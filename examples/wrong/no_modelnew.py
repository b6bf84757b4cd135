# kbv-target: level1/3_ReLU
# wrong: defines ModelX, not ModelNew.
import torch
import torch.nn as nn


class ModelX(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
