import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_LARGE = os.environ.get("KBV_SIZE", "small") == "large"


class Model(nn.Module):
    """Cross-entropy loss (mean over the batch) for multi-class classification."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(predictions, targets)


batch_size = 16384 if _LARGE else 64
num_classes = 1000 if _LARGE else 100
input_shape = (num_classes,)


def get_inputs():
    predictions = torch.rand(batch_size, *input_shape)
    targets = torch.randint(0, num_classes, (batch_size,))
    return [predictions, targets]


def get_init_inputs():
    return []
