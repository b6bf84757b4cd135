# kbv-target: level1/1_Square_matrix_multiplication
# wrong: returns the product with its last row sliced off (shape (N-1, N)).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)[:-1]
