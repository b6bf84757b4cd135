# kbv-target: level1/3_ReLU
# wrong: forward reads address 0 and crashes the worker process (SIGSEGV).
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)
        return torch.relu(x)
