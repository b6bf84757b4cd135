# kbv-target: level1/3_ReLU
# wrong: forward raises RuntimeError.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("kbv example: forward always fails")
