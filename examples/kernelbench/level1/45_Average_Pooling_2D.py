"""AvgPool2d (square kernel k, stride s defaulting to k, zero padding p, count_include_pad,
floor mode) on [N, C, H, W]. One CUDA block per (plane, output row): its threads read the k
input rows of the window with coalesced float4 loads and add them column by column into a
shared-memory row of column sums; then each output of the row adds k column sums and divides by
k*k. Every input element is read from HBM once (the 17 GB input dominates; the output is 0.14 GB).
64-bit indexing throughout (the input has 4.3e9 elements).

Correct on every input family: each output is a 121-term float sum (11 row sums of 11) divided
by k*k exactly as torch divides, so the error is a few ulp of the window's magnitude sum; zeros,
ties and constants are exact up to that rounding.
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
#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxSmemW = 12288;  // 48 KB of float column sums

// One block per (nc, oh). colsum[w] = sum of x[nc, h, w] over the window's rows (clipped to the
// image: padded rows contribute zero); then y[nc, oh, ow] = sum of colsum over the window's
// columns (clipped), divided by the full window size (count_include_pad).
template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    avgpool2d_row_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t H, int64_t W,
                         int64_t OH, int64_t OW, int k, int s, int p, float divisor) {
  extern __shared__ __align__(16) float colsum[];
  const int64_t nc = blockIdx.x / OH;
  const int64_t oh = blockIdx.x - nc * OH;
  const float* xp = x + nc * H * W;
  int64_t h0 = oh * s - p, h1 = h0 + k;
  if (h0 < 0) h0 = 0;
  if (h1 > H) h1 = H;
  // The columns any window of this row reaches.
  int64_t wlast = (OW - 1) * s - p + k;
  if (wlast > W) wlast = W;
  if constexpr (VEC) {
    const int64_t W4 = (wlast + 3) >> 2;  // W % 4 == 0, so this stays inside the row
    for (int64_t c4 = threadIdx.x; c4 < W4; c4 += kThreads) {
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      const float4* col = reinterpret_cast<const float4*>(xp + h0 * W) + c4;
      const int64_t W4row = W >> 2;
#pragma unroll 4
      for (int64_t h = h0; h < h1; ++h) {
        const float4 v = col[(h - h0) * W4row];
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
      }
      reinterpret_cast<float4*>(colsum)[c4] = acc;
    }
  } else {
    for (int64_t c = threadIdx.x; c < wlast; c += kThreads) {
      float acc = 0.f;
      for (int64_t h = h0; h < h1; ++h) acc += xp[h * W + c];
      colsum[c] = acc;
    }
  }
  __syncthreads();
  float* yr = y + (nc * OH + oh) * OW;
  for (int64_t ow = threadIdx.x; ow < OW; ow += kThreads) {
    int64_t w0 = ow * s - p, w1 = w0 + k;
    if (w0 < 0) w0 = 0;
    if (w1 > W) w1 = W;
    float acc = 0.f;
    for (int64_t w = w0; w < w1; ++w) acc += colsum[w];
    yr[ow] = acc / divisor;
  }
}

// Fallback for very wide rows: one thread per output.
__global__ void __launch_bounds__(kThreads)
    avgpool2d_generic_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t NC,
                             int64_t H, int64_t W, int64_t OH, int64_t OW, int k, int s, int p,
                             float divisor) {
  const int64_t total = NC * OH * OW;
  const int64_t stride = (int64_t)gridDim.x * kThreads;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < total; i += stride) {
    const int64_t ow = i % OW;
    const int64_t t = i / OW;
    const int64_t oh = t % OH;
    const int64_t nc = t / OH;
    int64_t h0 = oh * s - p, h1 = h0 + k, w0 = ow * s - p, w1 = w0 + k;
    if (h0 < 0) h0 = 0;
    if (h1 > H) h1 = H;
    if (w0 < 0) w0 = 0;
    if (w1 > W) w1 = W;
    const float* xp = x + nc * H * W;
    float acc = 0.f;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) acc += xp[h * W + w];
    y[i] = acc / divisor;
  }
}

}  // namespace

torch::Tensor avgpool2d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() == 4, "x must be [N, C, H, W]");
  TORCH_CHECK(k > 0 && s > 0 && p >= 0 && 2 * p <= k, "bad pooling parameters");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  const int64_t N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
  const int64_t OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
  TORCH_CHECK(H + 2 * p >= k && W + 2 * p >= k, "input smaller than the pooling window");
  auto y = torch::empty({N, C, OH, OW}, xc.options());
  const int64_t NC = N * C;
  if (y.numel() == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float divisor = (float)(k * k);
  const int64_t rows = NC * OH;
  if (W <= kMaxSmemW && rows <= 2147483647LL) {
    const bool vec = (W % 4 == 0) && ((reinterpret_cast<uintptr_t>(xp) & 15) == 0);
    const size_t smem = (size_t)(((W + 3) / 4) * 4) * sizeof(float);
    if (vec)
      avgpool2d_row_kernel<true><<<(unsigned)rows, kThreads, smem, stream>>>(
          xp, yp, H, W, OH, OW, (int)k, (int)s, (int)p, divisor);
    else
      avgpool2d_row_kernel<false><<<(unsigned)rows, kThreads, smem, stream>>>(
          xp, yp, H, W, OH, OW, (int)k, (int)s, (int)p, divisor);
  } else {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t want = (NC * OH * OW + kThreads - 1) / kThreads;
    const int blocks = (int)std::min<int64_t>(want, (int64_t)sms * 16);
    avgpool2d_generic_kernel<<<blocks, kThreads, 0, stream>>>(xp, yp, NC, H, W, OH, OW, (int)k,
                                                              (int)s, (int)p, divisor);
  }
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "avgpool2d kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor avgpool2d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p);"

_ext = load_inline(
    name="kbv_kb_l1_45_avgpool2d",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["avgpool2d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.kernel_size = int(kernel_size)
        self.stride = int(stride) if stride is not None else int(kernel_size)
        self.padding = int(padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.avgpool2d_forward(x, self.kernel_size, self.stride, self.padding)
