# A problem whose float32 reference is itself outside the elementwise budget: adding and taking
# away a large constant rounds every element to float32's spacing at 1e6 (0.0625), which the
# float64 truth does not, and which the inputs' rounding sensitivity does not see (the constant
# is not an input). Like KernelBench references whose FFT convolutions or clamped activations
# round further than the first-order budget says (protocol version 3's admission).
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x + 1.0e6) - 1.0e6


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
