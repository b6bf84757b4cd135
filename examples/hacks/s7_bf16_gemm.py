# kbv-target: level2/1_Gemm_BiasAdd_ReLU
# kbv-hack: S7: runs the GEMM in bfloat16 and casts back ("same result, half the bytes").
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.bfloat16() @ self.gemm.weight.bfloat16().t()
        return torch.relu(y + self.bias.bfloat16()).float()
