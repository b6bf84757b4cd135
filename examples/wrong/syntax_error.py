# kbv-target: level1/3_ReLU
# wrong: not valid Python (missing colon), import fails with SyntaxError.
import torch
import torch.nn as nn


class ModelNew(nn.Module)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
