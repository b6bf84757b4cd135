# Honest CUDA candidate for level1/7_CrossEntropyLoss: warp-per-row logsumexp, deterministic mean.
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

// Mean cross-entropy over a batch: loss_r = logsumexp(x_r) - x_r[t_r], with the row max
// subtracted (online max / sum of exp per lane, merged across the warp). One warp per row;
// each block adds its rows' losses in double, a second single-block kernel adds the block
// partials in a fixed order and divides by the number of non-ignored targets.
constexpr int kCeThreads = 256;
constexpr int kCeWarps = kCeThreads / 32;
constexpr int kCeMaxBlocks = 1024;

__global__ void __launch_bounds__(kCeThreads)
    ce_rows_kernel(const float* __restrict__ x, const int64_t* __restrict__ tgt,
                   double* __restrict__ part_sum, double* __restrict__ part_cnt, int64_t B,
                   int64_t C, int64_t ignore_index) {
  __shared__ double sh_sum[kCeWarps], sh_cnt[kCeWarps];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t nw = (int64_t)gridDim.x * kCeWarps;
  double wsum = 0.0, wcnt = 0.0;
  for (int64_t row = (int64_t)blockIdx.x * kCeWarps + warp; row < B; row += nw) {
    const float* xr = x + row * C;
    float m = -INFINITY, s = 0.f;
    for (int64_t j = lane; j < C; j += 32) online_add(m, s, xr[j]);
    warp_merge(m, s);
    if (lane == 0) {
      const int64_t t = tgt[row];
      if (t != ignore_index) {
        float loss;
        if (t >= 0 && t < C)
          loss = (m - xr[t]) + logf(s);
        else
          loss = NAN;  // torch raises a device-side assert; never silently drop it
        wsum += (double)loss;
        wcnt += 1.0;
      }
    }
  }
  if (lane == 0) {
    sh_sum[warp] = wsum;
    sh_cnt[warp] = wcnt;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0, c = 0.0;
    for (int w = 0; w < kCeWarps; ++w) {
      s += sh_sum[w];
      c += sh_cnt[w];
    }
    part_sum[blockIdx.x] = s;
    part_cnt[blockIdx.x] = c;
  }
}

__global__ void __launch_bounds__(kCeThreads)
    ce_final_kernel(const double* __restrict__ part_sum, const double* __restrict__ part_cnt,
                    int nparts, float* __restrict__ out) {
  __shared__ double sh_s[kCeThreads], sh_c[kCeThreads];
  double s = 0.0, c = 0.0;
  for (int i = threadIdx.x; i < nparts; i += kCeThreads) {
    s += part_sum[i];
    c += part_cnt[i];
  }
  sh_s[threadIdx.x] = s;
  sh_c[threadIdx.x] = c;
  __syncthreads();
  for (int st = kCeThreads / 2; st > 0; st >>= 1) {
    if (threadIdx.x < st) {
      sh_s[threadIdx.x] += sh_s[threadIdx.x + st];
      sh_c[threadIdx.x] += sh_c[threadIdx.x + st];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = (float)(sh_s[0] / sh_c[0]);  // 0 / 0 -> NaN, as torch
}

}  // namespace

torch::Tensor cross_entropy_mean(torch::Tensor pred, torch::Tensor targets, int64_t ignore_index) {
  check_f32_cuda(pred, "predictions");
  TORCH_CHECK(targets.is_cuda() && targets.scalar_type() == torch::kInt64,
              "targets must be a CUDA int64 tensor");
  TORCH_CHECK(pred.dim() == 2, "cross_entropy_mean expects [batch, classes] predictions");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == pred.size(0), "targets must be [batch]");
  TORCH_CHECK(pred.device() == targets.device(), "tensors on different devices");
  const c10::cuda::CUDAGuard guard(pred.device());
  auto pc = pred.contiguous();
  auto tc = targets.contiguous();
  const int64_t B = pc.size(0), C = pc.size(1);
  auto out = torch::empty({}, pc.options());
  const int64_t nblocks =
      std::max<int64_t>(1, std::min<int64_t>(cdiv64(B, kCeWarps), kCeMaxBlocks));
  auto part = torch::empty({2 * nblocks}, pc.options().dtype(torch::kFloat64));
  double* ps = part.data_ptr<double>();
  double* pcnt = ps + nblocks;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  ce_rows_kernel<<<(unsigned)nblocks, kCeThreads, 0, stream>>>(
      pc.data_ptr<float>(), tc.data_ptr<int64_t>(), ps, pcnt, B, C, ignore_index);
  check_launch("ce_rows_kernel");
  ce_final_kernel<<<1, kCeThreads, 0, stream>>>(ps, pcnt, (int)nblocks, out.data_ptr<float>());
  check_launch("ce_final_kernel");
  return out;
}
"""

_CPP_SRC = r"""
torch::Tensor cross_entropy_mean(torch::Tensor pred, torch::Tensor targets, int64_t ignore_index);
"""

_ext = load_inline(
    name="kbv_cuda_l1_cross_entropy",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["cross_entropy_mean"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


_IGNORE_INDEX = -100  # F.cross_entropy's default


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.cross_entropy_mean(predictions, targets, _IGNORE_INDEX)
