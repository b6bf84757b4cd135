# kbv-target: level1/3_ReLU
# wrong: the kernel writes far outside its output (a CUDA illegal address that kills the context)
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
__global__ void relu_bad(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i + (1L << 40)] = x[i] > 0.f ? x[i] : 0.f;  // wildly out of bounds
}
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  relu_bad<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

ext = load_inline(
    name="kbv_wrong_illegal_address",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources=CUDA_SOURCE,
    functions=["relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x.contiguous())
