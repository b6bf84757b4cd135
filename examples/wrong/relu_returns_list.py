# kbv-target: level1/3_ReLU
# wrong: returns a list [out] instead of a tensor.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> list:
        return [torch.relu(x)]
