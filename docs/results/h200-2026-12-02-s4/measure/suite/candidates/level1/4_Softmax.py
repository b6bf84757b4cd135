# Honest CUDA candidate for level1/4_Softmax: block-per-row online max/sum, then normalise.
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

// Online (max, sum of exp(x - max)) accumulation. m never becomes NaN; a NaN input makes s
// NaN (so the whole row is NaN, as in torch); -inf inputs contribute exactly 0.
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;  // m == -inf gives s * 0 + 1
    m = x;
  } else if (!(x == -INFINITY)) {
    s += expf(x - m);
  }
}

__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  const float a = (m == -INFINITY) ? s * 0.f : s * expf(m - mn);
  const float b = (m2 == -INFINITY) ? s2 * 0.f : s2 * expf(m2 - mn);
  m = mn;
  s = a + b;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    online_merge(m, s, m2, s2);
  }
}

// One block per row: pass 1 computes the row max and sum of exp(x - max) online (a single
// read), pass 2 writes exp(x - max) / sum (the row is usually still in L2).
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK)
    softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                        int64_t n) {
  constexpr int NW = BLOCK / 32;
  __shared__ float sh_m[NW], sh_s[NW];
  __shared__ float row_m, row_s;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float m = -INFINITY, s = 0.f;
    if constexpr (VEC) {
      const float4* x4 = reinterpret_cast<const float4*>(xr);
      const int64_t n4 = n / 4;
      for (int64_t i = threadIdx.x; i < n4; i += BLOCK) {
        const float4 v = x4[i];
        online_add(m, s, v.x);
        online_add(m, s, v.y);
        online_add(m, s, v.z);
        online_add(m, s, v.w);
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += BLOCK) online_add(m, s, xr[i]);
    }
    warp_merge(m, s);
    if (lane == 0) {
      sh_m[warp] = m;
      sh_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
      m = lane < NW ? sh_m[lane] : -INFINITY;
      s = lane < NW ? sh_s[lane] : 0.f;
      warp_merge(m, s);
      if (lane == 0) {
        row_m = m;
        row_s = s;
      }
    }
    __syncthreads();
    const float rm = row_m, rs = row_s;
    if constexpr (VEC) {
      const float4* x4 = reinterpret_cast<const float4*>(xr);
      float4* y4 = reinterpret_cast<float4*>(yr);
      const int64_t n4 = n / 4;
      for (int64_t i = threadIdx.x; i < n4; i += BLOCK) {
        float4 v = x4[i];
        v.x = expf(v.x - rm) / rs;
        v.y = expf(v.y - rm) / rs;
        v.z = expf(v.z - rm) / rs;
        v.w = expf(v.w - rm) / rs;
        y4[i] = v;
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += BLOCK) yr[i] = expf(xr[i] - rm) / rs;
    }
    __syncthreads();  // shared row stats are rewritten for the next row
  }
}

template <int BLOCK>
void launch_softmax(const float* x, float* y, int64_t rows, int64_t n, bool vec,
                    cudaStream_t stream) {
  const int64_t blocks = std::min<int64_t>(rows, 2147483647LL);
  if (vec)
    softmax_rows_kernel<BLOCK, true><<<(unsigned)blocks, BLOCK, 0, stream>>>(x, y, rows, n);
  else
    softmax_rows_kernel<BLOCK, false><<<(unsigned)blocks, BLOCK, 0, stream>>>(x, y, rows, n);
  check_launch("softmax_rows_kernel");
}

}  // namespace

torch::Tensor softmax_dim1(torch::Tensor x) {
  check_f32_cuda(x, "x");
  TORCH_CHECK(x.dim() == 2, "softmax_dim1 expects a 2-D tensor");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  const int64_t rows = xc.size(0), n = xc.size(1);
  if (rows == 0 || n == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool vec = (n % 4 == 0) && aligned16(xp) && aligned16(yp);
  if (n >= 2048)
    launch_softmax<512>(xp, yp, rows, n, vec, stream);
  else
    launch_softmax<128>(xp, yp, rows, n, vec, stream);
  return y;
}
"""

_CPP_SRC = r"""
torch::Tensor softmax_dim1(torch::Tensor x);
"""

_ext = load_inline(
    name="kbv_cuda_l1_softmax",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["softmax_dim1"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_dim1(x)
