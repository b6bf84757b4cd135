import os

import torch
import torch.nn as nn

_LARGE = os.environ.get("KBV_SIZE", "small") == "large"


class Model(nn.Module):
    """2-D convolution, 3x3 kernel, stride 1, padding 1, with bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16 if _LARGE else 2
in_channels = 64 if _LARGE else 8
out_channels = 128 if _LARGE else 16
height = 128 if _LARGE else 32
width = 128 if _LARGE else 32


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]
