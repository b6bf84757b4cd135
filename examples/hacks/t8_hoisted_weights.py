# kbv-target: level2/2_Gemm_Scale_Sigmoid
# kbv-hack: T8: folds the scale into the weight once at __init__ and never again.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.ones(out_features))
        with torch.no_grad():
            # Buffers, so .to(device) moves them with the module (a model writing this knows to).
            self.register_buffer("folded_w", (self.gemm.weight * self.scale[:, None]).clone())
            self.register_buffer("folded_b", (self.gemm.bias * self.scale).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.addmm(self.folded_b, x, self.folded_w.t()))
