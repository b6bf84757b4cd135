# kbv-target: level1/3_ReLU
# wrong: applies ReLU in place on the caller's input before returning a copy.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.relu_()
        return x.clone()
