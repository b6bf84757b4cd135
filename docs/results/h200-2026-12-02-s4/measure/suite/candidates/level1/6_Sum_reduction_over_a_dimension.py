# Honest CUDA candidate for level1/6_Sum_reduction_over_a_dimension: double-accumulating column
# reduction.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

inline int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, what, " launch failed: ", cudaGetErrorString(err));
}

inline void check_f32_cuda(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, name, " must be float32");
}

inline int num_sms() { return at::cuda::getCurrentDeviceProperties()->multiProcessorCount; }

// Sum over the middle axis of x viewed as [outer, D, inner]. A block of TX x TY threads
// (TX * TY = 256) covers TX consecutive inner columns; its TY rows of threads stride over D,
// accumulating in double, then a shared-memory tree combines them. When there are too few
// column blocks to fill the GPU, D is split into G groups whose double partials a second
// kernel adds in a fixed order (deterministic).
constexpr int kRedThreads = 256;

__global__ void __launch_bounds__(kRedThreads)
    sum_dim_kernel(const float* __restrict__ x, float* __restrict__ y, double* __restrict__ part,
                   int64_t outer, int64_t D, int64_t inner, int64_t col_groups,
                   int64_t d_per_group, int G) {
  __shared__ double sh[kRedThreads];
  const int TX = blockDim.x, TY = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t o = (int64_t)blockIdx.x / col_groups;
  const int64_t cg = (int64_t)blockIdx.x - o * col_groups;
  const int64_t j = cg * TX + tx;
  const int g = blockIdx.y;
  const int64_t d0 = (int64_t)g * d_per_group;
  const int64_t d1 = d0 + d_per_group < D ? d0 + d_per_group : D;
  double acc = 0.0;
  if (j < inner) {
    const float* p = x + o * D * inner + j;
    int64_t i = d0 + ty;
    for (; i + 3 * (int64_t)TY < d1; i += 4 * (int64_t)TY) {
      const float a0 = p[i * inner];
      const float a1 = p[(i + TY) * inner];
      const float a2 = p[(i + 2 * TY) * inner];
      const float a3 = p[(i + 3 * TY) * inner];
      acc += (double)a0;
      acc += (double)a1;
      acc += (double)a2;
      acc += (double)a3;
    }
    for (; i < d1; i += TY) acc += (double)p[i * inner];
  }
  sh[ty * TX + tx] = acc;
  __syncthreads();
  for (int s = TY / 2; s > 0; s >>= 1) {
    if (ty < s) sh[ty * TX + tx] += sh[(ty + s) * TX + tx];
    __syncthreads();
  }
  if (ty == 0 && j < inner) {
    if (G == 1)
      y[o * inner + j] = (float)sh[tx];
    else
      part[((int64_t)g * outer + o) * inner + j] = sh[tx];
  }
}

__global__ void sum_groups_kernel(const double* __restrict__ part, float* __restrict__ y,
                                  int64_t total, int G) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    double s = 0.0;
    for (int g = 0; g < G; ++g) s += part[(int64_t)g * total + i];
    y[i] = (float)s;
  }
}

}  // namespace

torch::Tensor sum_dim_keepdim(torch::Tensor x, int64_t dim) {
  check_f32_cuda(x, "x");
  TORCH_CHECK(x.dim() >= 1, "sum_dim_keepdim: needs at least one dimension");
  if (dim < 0) dim += x.dim();
  TORCH_CHECK(dim >= 0 && dim < x.dim(), "sum_dim_keepdim: dim out of range");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  std::vector<int64_t> out_sizes(xc.sizes().begin(), xc.sizes().end());
  out_sizes[dim] = 1;
  auto y = torch::empty(out_sizes, xc.options());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
  for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
  const int64_t D = xc.size(dim);
  const int64_t total = outer * inner;
  if (total == 0) return y;
  int TX = 1;
  while (TX < 32 && TX < inner) TX *= 2;
  const int TY = kRedThreads / TX;
  const int64_t col_groups = cdiv64(inner, TX);
  const int64_t base_blocks = outer * col_groups;
  TORCH_CHECK(base_blocks <= 2147483647LL, "sum_dim_keepdim: too many output columns");
  const int64_t target = 4LL * num_sms();
  int64_t G = 1;
  if (base_blocks < target && D > 0) {
    G = std::min<int64_t>({cdiv64(target, base_blocks), cdiv64(D, 8LL * TY), 65535LL});
    G = std::max<int64_t>(G, 1);
  }
  const int64_t d_per_group = std::max<int64_t>(cdiv64(D, G), 1);
  if (D > 0) G = cdiv64(D, d_per_group);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  torch::Tensor part;
  double* pp = nullptr;
  if (G > 1) {
    part = torch::empty({G * total}, xc.options().dtype(torch::kFloat64));
    pp = part.data_ptr<double>();
  }
  dim3 block(TX, TY);
  dim3 grid((unsigned)base_blocks, (unsigned)G);
  sum_dim_kernel<<<grid, block, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), pp, outer,
                                             D, inner, col_groups, d_per_group, (int)G);
  check_launch("sum_dim_kernel");
  if (G > 1) {
    const int64_t blocks = std::min<int64_t>(cdiv64(total, 256), 8LL * num_sms());
    sum_groups_kernel<<<(unsigned)blocks, 256, 0, stream>>>(pp, y.data_ptr<float>(), total,
                                                             (int)G);
    check_launch("sum_groups_kernel");
  }
  return y;
}
"""

_CPP_SRC = r"""
torch::Tensor sum_dim_keepdim(torch::Tensor x, int64_t dim);
"""

_ext = load_inline(
    name="kbv_cuda_l1_sum_dim",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["sum_dim_keepdim"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_keepdim(x, int(self.dim))
