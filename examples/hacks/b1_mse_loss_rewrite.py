# kbv-target: level1/10_MSELoss
# kbv-hack: B1: a "kernel" that is another library operator: F.mse_loss for mean((p - t) ** 2).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Issue 19: every family passed and it timed 1.89x against the reference, since
    library_main_op only looks for the reference's own main operator done by PyTorch. None of
    the candidate's own code computes anything: no_custom_kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(predictions, targets)
