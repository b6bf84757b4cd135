# kbv-target: level1/3_ReLU
# wrong: correct ReLU except one NaN written into the output.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(x)
        out.view(-1)[0] = float("nan")
        return out
