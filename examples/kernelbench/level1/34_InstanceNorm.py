"""InstanceNorm2d (no affine, no running stats, eps 1e-5) of [N, C, H, W] as two CUDA kernels.
Each (n, c) plane is cut into chunks of at most 64K elements; kernel 1 gives each chunk one block
that sums x and x^2 in double (float4 loads) into per-chunk partials; kernel 2 gives each chunk
one block that combines its plane's partials in a fixed order (every block of a plane gets the
same mean and variance: deterministic, no atomics) and writes (x - mean) * rstd.

Correct on every input family: mean and E[x^2] are accumulated per element in double (262144
terms per plane) and the variance E[x^2] - mean^2 is formed in double and clamped at 0, so large
offsets (x ~ 8 sigma) and 1e6-sized values lose nothing that float would keep; a constant or
all-zero plane gives var 0 and output exactly 0, as the reference does.
"""

# kbv-kernelbench: 423217d
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

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kChunk = 65536;  // elements of one plane per block (a multiple of 4)

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Chunk index q = (n * C + c) * P + p covers plane elements [p * kChunk, min(HW, (p+1) * kChunk)).
template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    in_stats_kernel(const float* __restrict__ x, int64_t HW, int64_t P,
                    double* __restrict__ psum, double* __restrict__ psq) {
  __shared__ double r1[kWarps], r2[kWarps];
  const int64_t q = blockIdx.x;
  const int64_t plane = q / P, p = q - plane * P;
  const int64_t b0 = p * kChunk;
  const int64_t len = (HW - b0 < kChunk) ? HW - b0 : kChunk;
  const float* xp = x + plane * HW + b0;
  double s1 = 0.0, s2 = 0.0;
  if constexpr (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(xp);
    const int64_t n4 = len >> 2;  // len is a multiple of 4 when VEC
    int64_t i = threadIdx.x;
    for (; i + kThreads < n4; i += 2 * kThreads) {
      const float4 a = x4[i];
      const float4 b = x4[i + kThreads];
      const double a0 = a.x, a1 = a.y, a2 = a.z, a3 = a.w;
      const double c0 = b.x, c1 = b.y, c2 = b.z, c3 = b.w;
      s1 += ((a0 + a1) + (a2 + a3)) + ((c0 + c1) + (c2 + c3));
      s2 = fma(a0, a0, s2);
      s2 = fma(a1, a1, s2);
      s2 = fma(a2, a2, s2);
      s2 = fma(a3, a3, s2);
      s2 = fma(c0, c0, s2);
      s2 = fma(c1, c1, s2);
      s2 = fma(c2, c2, s2);
      s2 = fma(c3, c3, s2);
    }
    for (; i < n4; i += kThreads) {
      const float4 a = x4[i];
      const double a0 = a.x, a1 = a.y, a2 = a.z, a3 = a.w;
      s1 += (a0 + a1) + (a2 + a3);
      s2 = fma(a0, a0, s2);
      s2 = fma(a1, a1, s2);
      s2 = fma(a2, a2, s2);
      s2 = fma(a3, a3, s2);
    }
  } else {
    for (int64_t i = threadIdx.x; i < len; i += kThreads) {
      const double a = xp[i];
      s1 += a;
      s2 = fma(a, a, s2);
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  if (lane == 0) {
    r1[warp] = s1;
    r2[warp] = s2;
  }
  __syncthreads();
  if (warp == 0) {
    double t1 = lane < kWarps ? r1[lane] : 0.0;
    double t2 = lane < kWarps ? r2[lane] : 0.0;
    t1 = warp_sum(t1);
    t2 = warp_sum(t2);
    if (lane == 0) {
      psum[q] = t1;
      psq[q] = t2;
    }
  }
}

// One block per chunk: combine the group's cpg * P partials (fixed order), then normalise.
// Here a group is one (n, c) plane (cpg = 1) and weight / bias are null (no affine).
template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    in_apply_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t C, int64_t HW,
                    int64_t P, int64_t cpg, const double* __restrict__ psum,
                    const double* __restrict__ psq, const float* __restrict__ weight,
                    const float* __restrict__ bias, double eps) {
  __shared__ float s_mean, s_scale, s_shift;
  const int64_t q = blockIdx.x;
  const int64_t plane = q / P, p = q - plane * P;
  const int64_t nidx = plane / C, c = plane - nidx * C;
  if (threadIdx.x < 32) {
    const int64_t g = c / cpg;
    const int64_t q0 = (nidx * C + g * cpg) * P;  // the group's chunks are contiguous
    const int64_t nq = cpg * P;
    double t1 = 0.0, t2 = 0.0;
    for (int64_t k = threadIdx.x; k < nq; k += 32) {
      t1 += psum[q0 + k];
      t2 += psq[q0 + k];
    }
    t1 = warp_sum(t1);
    t2 = warp_sum(t2);
    if (threadIdx.x == 0) {
      const double cnt = (double)cpg * (double)HW;
      const double mean = t1 / cnt;
      const double var = fmax(t2 / cnt - mean * mean, 0.0);
      const double rstd = 1.0 / sqrt(var + eps);
      const double w = weight ? (double)weight[c] : 1.0;
      s_mean = (float)mean;
      s_scale = (float)(rstd * w);
      s_shift = bias ? bias[c] : 0.f;
    }
  }
  __syncthreads();
  const float mean = s_mean, scale = s_scale, shift = s_shift;
  const int64_t b0 = p * kChunk;
  const int64_t len = (HW - b0 < kChunk) ? HW - b0 : kChunk;
  const float* xp = x + plane * HW + b0;
  float* yp = y + plane * HW + b0;
  if constexpr (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(xp);
    float4* y4 = reinterpret_cast<float4*>(yp);
    const int64_t n4 = len >> 2;
    for (int64_t i = threadIdx.x; i < n4; i += kThreads) {
      float4 v = __ldcs(x4 + i);
      v.x = fmaf(v.x - mean, scale, shift);
      v.y = fmaf(v.y - mean, scale, shift);
      v.z = fmaf(v.z - mean, scale, shift);
      v.w = fmaf(v.w - mean, scale, shift);
      __stcs(y4 + i, v);
    }
  } else {
    for (int64_t i = threadIdx.x; i < len; i += kThreads) yp[i] = fmaf(xp[i] - mean, scale, shift);
  }
}

}  // namespace

torch::Tensor instance_norm_forward(torch::Tensor x, double eps) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() >= 3, "x must be [N, C, H, W]");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  if (xc.numel() == 0) return y;
  const int64_t N = xc.size(0), C = xc.size(1);
  const int64_t HW = xc.numel() / (N * C);
  const int64_t cpg = 1;  // one channel per normalisation group
  const float* wp = nullptr;  // no affine
  const float* bp = nullptr;
  const int64_t P = (HW + kChunk - 1) / kChunk;
  const int64_t nchunks = N * C * P;
  TORCH_CHECK(nchunks <= 2147483647LL, "too many chunks");
  // Per-call workspace (nothing is kept between calls).
  auto part = torch::empty({2, nchunks}, xc.options().dtype(torch::kFloat64));
  double* psum = part.data_ptr<double>();
  double* psq = psum + nchunks;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool vec = (HW % 4 == 0) &&
      (((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0);
  if (vec)
    in_stats_kernel<true><<<(unsigned)nchunks, kThreads, 0, stream>>>(xp, HW, P, psum, psq);
  else
    in_stats_kernel<false><<<(unsigned)nchunks, kThreads, 0, stream>>>(xp, HW, P, psum, psq);
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "instance norm stats launch failed: ", cudaGetErrorString(err));
  if (vec)
    in_apply_kernel<true><<<(unsigned)nchunks, kThreads, 0, stream>>>(
        xp, yp, C, HW, P, cpg, psum, psq, wp, bp, eps);
  else
    in_apply_kernel<false><<<(unsigned)nchunks, kThreads, 0, stream>>>(
        xp, yp, C, HW, P, cpg, psum, psq, wp, bp, eps);
  err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "instance norm apply launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor instance_norm_forward(torch::Tensor x, double eps);"

_ext = load_inline(
    name="kbv_kb_l1_34_instancenorm",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["instance_norm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features
        self.eps = 1e-5  # nn.InstanceNorm2d's default; affine=False, no running stats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.instance_norm_forward(x, self.eps)
