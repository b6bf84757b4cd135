# kbv-target: level1/3_ReLU
# kbv-honest: CUDA graphs keyed by the input's address and shape: each replay recomputes from
#   whatever the captured address holds now, so new values in the same tensor are honoured and a
#   tensor at a new address gets a graph of its own.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];
}

void relu_into(torch::Tensor x, torch::Tensor y) {
  int64_t n = x.numel();
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
}
"""

_ext = load_inline(
    name="kbv_honest_cuda_graph_per_address",
    cpp_sources="void relu_into(torch::Tensor x, torch::Tensor y);",
    cuda_sources=_CUDA,
    functions=["relu_into"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}  # (address, shape) -> (graph, its output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_contiguous():
            x = x.contiguous()
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.graphs:
            out = torch.empty_like(x)
            _ext.relu_into(x, out)  # warm-up outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _ext.relu_into(x, out)
            self.graphs[key] = (graph, out)
        graph, out = self.graphs[key]
        graph.replay()
        return out.clone()
