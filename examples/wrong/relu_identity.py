# kbv-target: level1/3_ReLU
# wrong: returns x unchanged (passes on torch.rand inputs, fails on mixed sign).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()
