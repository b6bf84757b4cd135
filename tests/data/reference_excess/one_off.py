# The reference's own computation, with one element off by 1: inside the normwise budget, but far
# beyond the excess the reference itself shows at any element (0.03 against a budget near 0.01).
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = (x + 1.0e6) - 1.0e6
        y.view(-1)[100] += 1.0
        return y
