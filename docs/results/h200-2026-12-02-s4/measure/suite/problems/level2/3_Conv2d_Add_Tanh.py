import os

import torch
import torch.nn as nn

_LARGE = os.environ.get("KBV_SIZE", "small") == "large"


class Model(nn.Module):
    """2-D convolution (no padding), add a per-channel bias, then tanh."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = x + self.bias
        x = torch.tanh(x)
        return x


batch_size = 32 if _LARGE else 2
in_channels = 32 if _LARGE else 4
out_channels = 64 if _LARGE else 8
height = 128 if _LARGE else 16
width = 128 if _LARGE else 16
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
