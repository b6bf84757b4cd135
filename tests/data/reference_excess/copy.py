# The reference's own computation: as far from the truth as the reference, no further.
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x + 1.0e6) - 1.0e6
