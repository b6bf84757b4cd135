# kbv-target: level2/3_Conv2d_Add_Tanh
# kbv-honest: the convolution by at::conv2d (cuDNN), the bias add and tanh fused into one CUDA
#   kernel of its own.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// y[b, c, h, w] = tanh(y[b, c, h, w] + conv_bias[c] + bias[c]) in place on the conv output
__global__ void bias_tanh_kernel(float* __restrict__ y, const float* __restrict__ conv_bias,
                                 const float* __restrict__ bias, int64_t n, int channels,
                                 int64_t plane) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int c = (int)((i / plane) % channels);
    y[i] = tanhf(y[i] + conv_bias[c] + bias[c]);
  }
}

torch::Tensor conv_bias_tanh(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias,
                             torch::Tensor bias) {
  auto y = at::conv2d(x.contiguous(), weight).contiguous();  // no bias: fused below
  int64_t n = y.numel();
  int channels = y.size(1);
  int64_t plane = y.size(2) * y.size(3);
  bias_tanh_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.contiguous().data_ptr<float>(), n,
      channels, plane);
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_cuda_conv_epilogue",
    cpp_sources=(
        "torch::Tensor conv_bias_tanh(torch::Tensor x, torch::Tensor weight, "
        "torch::Tensor conv_bias, torch::Tensor bias);"
    ),
    cuda_sources=_CUDA,
    functions=["conv_bias_tanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_bias_tanh(x, self.conv.weight, self.conv.bias, self.bias)
