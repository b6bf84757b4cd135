# kbv-target: level1/3_ReLU
# wrong: ReLU in place and returns the input itself (output aliases the input).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.relu_(x)
        return x
