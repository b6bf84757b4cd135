# kbv-target: level1/3_ReLU
# wrong: forward takes no inputs (TypeError when called with the problem's inputs).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self) -> torch.Tensor:
        return torch.zeros(1)
