# Honest CUDA candidate for level1/5_LayerNorm: chunked double-precision row statistics.
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

// LayerNorm over the trailing D elements of each of R rows, in three launches:
//  1. per (row, chunk) block: sums of (x - shift) and (x - shift)^2 in double, where shift is
//     the row's first element (removes any common offset before squaring);
//  2. per row: combine the chunk sums, mean and biased variance in double, rstd;
//  3. per (row, chunk) block: y = (x - mean) * rstd * w + b.
// Splitting rows into chunks keeps every SM busy when there are few, very long rows.
constexpr int kLnThreads = 256;
constexpr int64_t kLnChunk = 8192;  // multiple of 4

__device__ __forceinline__ double block_sum_d(double v, double* sh) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // sh may still be read by a previous call
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  double t = 0.0;
  if (warp == 0) {
    t = lane < kLnThreads / 32 ? sh[lane] : 0.0;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
  }
  return t;  // valid in thread 0
}

__global__ void __launch_bounds__(kLnThreads)
    ln_stats_kernel(const float* __restrict__ x, double* __restrict__ part, int64_t rows,
                    int64_t D, int64_t chunks, bool vec) {
  __shared__ double sh[kLnThreads / 32];
  const int64_t nblk = rows * chunks;
  for (int64_t bid = blockIdx.x; bid < nblk; bid += gridDim.x) {
    const int64_t r = bid / chunks;
    const int64_t c = bid - r * chunks;
    const float* xr = x + r * D;
    const double shift = (double)xr[0];
    const int64_t beg = c * kLnChunk;
    const int64_t end = beg + kLnChunk < D ? beg + kLnChunk : D;
    double s1 = 0.0, s2 = 0.0;
    if (vec) {
      for (int64_t i = beg + 4 * (int64_t)threadIdx.x; i < end; i += 4 * kLnThreads) {
        const float4 v = *reinterpret_cast<const float4*>(xr + i);
        const double d0 = (double)v.x - shift, d1 = (double)v.y - shift;
        const double d2 = (double)v.z - shift, d3 = (double)v.w - shift;
        s1 += (d0 + d1) + (d2 + d3);
        s2 += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
      }
    } else {
      for (int64_t i = beg + threadIdx.x; i < end; i += kLnThreads) {
        const double d = (double)xr[i] - shift;
        s1 += d;
        s2 += d * d;
      }
    }
    s1 = block_sum_d(s1, sh);
    s2 = block_sum_d(s2, sh);
    if (threadIdx.x == 0) {
      part[2 * bid] = s1;
      part[2 * bid + 1] = s2;
    }
  }
}

__global__ void ln_finalize_kernel(const float* __restrict__ x, const double* __restrict__ part,
                                   float* __restrict__ mean, float* __restrict__ rstd,
                                   int64_t rows, int64_t D, int64_t chunks, double eps) {
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  double s1 = 0.0, s2 = 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    s1 += part[2 * (r * chunks + c)];
    s2 += part[2 * (r * chunks + c) + 1];
  }
  const double shift = (double)x[r * D];
  const double dm = s1 / (double)D;
  double var = s2 / (double)D - dm * dm;
  if (var < 0.0) var = 0.0;
  mean[r] = (float)(shift + dm);
  rstd[r] = (float)(1.0 / sqrt(var + eps));
}

__global__ void __launch_bounds__(kLnThreads)
    ln_apply_kernel(const float* __restrict__ x, const float* __restrict__ w,
                    const float* __restrict__ b, const float* __restrict__ mean,
                    const float* __restrict__ rstd, float* __restrict__ y, int64_t rows,
                    int64_t D, int64_t chunks, bool vec) {
  const int64_t nblk = rows * chunks;
  for (int64_t bid = blockIdx.x; bid < nblk; bid += gridDim.x) {
    const int64_t r = bid / chunks;
    const int64_t c = bid - r * chunks;
    const float* xr = x + r * D;
    float* yr = y + r * D;
    const float mu = mean[r], rs = rstd[r];
    const int64_t beg = c * kLnChunk;
    const int64_t end = beg + kLnChunk < D ? beg + kLnChunk : D;
    if (vec) {
      for (int64_t i = beg + 4 * (int64_t)threadIdx.x; i < end; i += 4 * kLnThreads) {
        const float4 v = *reinterpret_cast<const float4*>(xr + i);
        float4 wv = make_float4(1.f, 1.f, 1.f, 1.f);
        float4 bv = make_float4(0.f, 0.f, 0.f, 0.f);
        if (w) wv = *reinterpret_cast<const float4*>(w + i);
        if (b) bv = *reinterpret_cast<const float4*>(b + i);
        float4 o;
        o.x = (v.x - mu) * rs * wv.x + bv.x;
        o.y = (v.y - mu) * rs * wv.y + bv.y;
        o.z = (v.z - mu) * rs * wv.z + bv.z;
        o.w = (v.w - mu) * rs * wv.w + bv.w;
        *reinterpret_cast<float4*>(yr + i) = o;
      }
    } else {
      for (int64_t i = beg + threadIdx.x; i < end; i += kLnThreads) {
        const float wv = w ? w[i] : 1.f;
        const float bv = b ? b[i] : 0.f;
        yr[i] = (xr[i] - mu) * rs * wv + bv;
      }
    }
  }
}

}  // namespace

// weight / bias may be empty tensors (no affine part). norm_dims = len(normalized_shape).
torch::Tensor layer_norm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                              int64_t norm_dims, double eps) {
  check_f32_cuda(x, "x");
  TORCH_CHECK(norm_dims >= 1 && norm_dims <= x.dim(), "layer_norm: bad normalized_shape");
  const c10::cuda::CUDAGuard guard(x.device());
  int64_t D = 1;
  for (int64_t d = x.dim() - norm_dims; d < x.dim(); ++d) D *= x.size(d);
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  const int64_t numel = xc.numel();
  if (numel == 0) return y;
  const int64_t rows = numel / D;
  torch::Tensor wc, bc;
  const float* wp = nullptr;
  const float* bp = nullptr;
  if (weight.defined() && weight.numel() > 0) {
    check_f32_cuda(weight, "weight");
    TORCH_CHECK(weight.numel() == D && weight.device() == x.device(), "layer_norm: weight size");
    wc = weight.contiguous();
    wp = wc.data_ptr<float>();
  }
  if (bias.defined() && bias.numel() > 0) {
    check_f32_cuda(bias, "bias");
    TORCH_CHECK(bias.numel() == D && bias.device() == x.device(), "layer_norm: bias size");
    bc = bias.contiguous();
    bp = bc.data_ptr<float>();
  }
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool vec = (D % 4 == 0) && aligned16(xp) && aligned16(yp) && (!wp || aligned16(wp)) &&
                   (!bp || aligned16(bp));
  const int64_t chunks = cdiv64(D, kLnChunk);
  const int64_t nblk = rows * chunks;
  auto part = torch::empty({nblk * 2}, xc.options().dtype(torch::kFloat64));
  auto stats = torch::empty({rows * 2}, xc.options());
  float* mean = stats.data_ptr<float>();
  float* rstd = mean + rows;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t grid = std::min<int64_t>(nblk, 2147483647LL);
  ln_stats_kernel<<<(unsigned)grid, kLnThreads, 0, stream>>>(xp, part.data_ptr<double>(), rows, D,
                                                              chunks, vec);
  check_launch("ln_stats_kernel");
  ln_finalize_kernel<<<(unsigned)cdiv64(rows, 128), 128, 0, stream>>>(
      xp, part.data_ptr<double>(), mean, rstd, rows, D, chunks, eps);
  check_launch("ln_finalize_kernel");
  ln_apply_kernel<<<(unsigned)grid, kLnThreads, 0, stream>>>(xp, wp, bp, mean, rstd, yp, rows, D,
                                                              chunks, vec);
  check_launch("ln_apply_kernel");
  return y;
}
"""

_CPP_SRC = r"""
torch::Tensor layer_norm_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
    int64_t norm_dims, double eps);
"""

_ext = load_inline(
    name="kbv_cuda_l1_layernorm",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["layer_norm_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.ln
        shape = tuple(ln.normalized_shape)
        if x.dim() < len(shape) or tuple(x.shape[x.dim() - len(shape) :]) != shape:
            raise ValueError(f"input {tuple(x.shape)} does not end with {shape}")
        weight = ln.weight if ln.weight is not None else x.new_empty(0)
        bias = ln.bias if ln.bias is not None else x.new_empty(0)
        return _ext.layer_norm_cuda(x, weight, bias, len(shape), float(ln.eps))
