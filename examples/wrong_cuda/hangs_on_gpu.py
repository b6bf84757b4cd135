# kbv-target: level1/3_ReLU
# wrong: the kernel spins forever on the GPU (a GPU hang; only killing the process ends it)
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
__global__ void spin(volatile int* flag) { while (*flag == 0) { } }
torch::Tensor relu(torch::Tensor x) {
  auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
  spin<<<1, 1>>>(flag.data_ptr<int>());
  return torch::relu(x);
}
"""

ext = load_inline(
    name="kbv_wrong_gpu_hang",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources=CUDA_SOURCE,
    functions=["relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x.contiguous())
