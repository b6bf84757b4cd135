# kbv-target: level1/3_ReLU
# wrong: forward loops forever (the harness must time it out).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            pass
