# kbv-target: level1/3_ReLU
# wrong: ModelNew.__init__ requires an argument the problem's get_init_inputs() does not give.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
