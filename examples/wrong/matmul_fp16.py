# kbv-target: level1/1_Square_matrix_multiplication
# wrong: computes in float16 and casts back (precision loss; overflow beyond 65504).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.half(), B.half()).to(A.dtype)
