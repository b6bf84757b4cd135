"""MaxPool2d (square kernel k, stride s, padding p, dilation d, floor mode) on [N, C, H, W].
For stride 1 and dilation 1 (the problem: k=4, s=1, p=1) each CUDA thread owns one output column
of a 32-row tile and slides down it: per input row it takes the max of the k cells of its window
(coalesced, L1-shared loads across neighbouring lanes), keeps the last k row maxima in registers
and emits one output per row, so each input row is read about once per tile instead of k times.
Other parameters use a thread-per-output kernel.

Correct on every input family: max is exact; padding is ignored (never a candidate value) as in
torch; NaN is propagated with torch's rule (val > max || isnan(val)); ties and constants are
exact.
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

constexpr int kThreads = 128;
constexpr int kTileRows = 32;
constexpr int kMaxK = 8;

// torch's max rule: a NaN candidate wins and then stays (nothing compares greater than NaN).
__device__ __forceinline__ float nanmax(float m, float v) { return (v > m || v != v) ? v : m; }

// Stride 1, dilation 1. Block = (nc, row tile, column tile); thread = one output column.
__global__ void __launch_bounds__(kThreads)
    maxpool2d_s1_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t H, int64_t W,
                        int64_t OH, int64_t OW, int k, int p, int64_t ncol_tiles,
                        int64_t nrow_tiles) {
  int64_t b = blockIdx.x;
  const int64_t ct = b % ncol_tiles;
  b /= ncol_tiles;
  const int64_t rt = b % nrow_tiles;
  const int64_t nc = b / nrow_tiles;
  const int64_t ow = ct * kThreads + threadIdx.x;
  if (ow >= OW) return;  // no barriers below
  const int64_t oh0 = rt * kTileRows;
  const int64_t oh1 = (oh0 + kTileRows < OH) ? oh0 + kTileRows : OH;
  const float* xp = x + nc * H * W;
  float* yp = y + nc * OH * OW + ow;
  const int64_t iw0 = ow - p;
  float win[kMaxK];  // win[kMaxK - 1] is the newest row maximum
#pragma unroll
  for (int i = 0; i < kMaxK; ++i) win[i] = -INFINITY;
  const int64_t ih_end = oh1 - 1 - p + k;  // exclusive
  for (int64_t ih = oh0 - p; ih < ih_end; ++ih) {
    float hm = -INFINITY;
    if (ih >= 0 && ih < H) {
      const float* row = xp + ih * W;
      for (int kw = 0; kw < k; ++kw) {
        const int64_t iw = iw0 + kw;
        if (iw >= 0 && iw < W) hm = nanmax(hm, __ldg(row + iw));
      }
    }
#pragma unroll
    for (int i = 0; i < kMaxK - 1; ++i) win[i] = win[i + 1];
    win[kMaxK - 1] = hm;
    const int64_t oh = ih + p - (k - 1);  // the output whose window ends at input row ih
    if (oh >= oh0) {
      float m = -INFINITY;
#pragma unroll
      for (int i = 0; i < kMaxK; ++i)
        if (i >= kMaxK - k) m = nanmax(m, win[i]);
      __stcs(yp + oh * OW, m);
    }
  }
}

// Any stride / dilation / kernel size: one thread per output.
__global__ void __launch_bounds__(256)
    maxpool2d_generic_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t NC,
                             int64_t H, int64_t W, int64_t OH, int64_t OW, int k, int s, int p,
                             int d) {
  const int64_t total = NC * OH * OW;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t ow = i % OW;
    const int64_t t = i / OW;
    const int64_t oh = t % OH;
    const int64_t nc = t / OH;
    const float* xp = x + nc * H * W;
    const int64_t h0 = oh * s - p, w0 = ow * s - p;
    float m = -INFINITY;
    for (int kh = 0; kh < k; ++kh) {
      const int64_t ih = h0 + (int64_t)kh * d;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < k; ++kw) {
        const int64_t iw = w0 + (int64_t)kw * d;
        if (iw >= 0 && iw < W) m = nanmax(m, __ldg(xp + ih * W + iw));
      }
    }
    y[i] = m;
  }
}

}  // namespace

torch::Tensor maxpool2d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p, int64_t d) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() == 4, "x must be [N, C, H, W]");
  TORCH_CHECK(k > 0 && s > 0 && d > 0 && p >= 0 && 2 * p <= k, "bad pooling parameters");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  const int64_t N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
  const int64_t OH = (H + 2 * p - d * (k - 1) - 1) / s + 1;
  const int64_t OW = (W + 2 * p - d * (k - 1) - 1) / s + 1;
  TORCH_CHECK(OH > 0 && OW > 0, "output would be empty");
  auto y = torch::empty({N, C, OH, OW}, xc.options());
  const int64_t NC = N * C;
  if (y.numel() == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t ncol = (OW + kThreads - 1) / kThreads;
  const int64_t nrow = (OH + kTileRows - 1) / kTileRows;
  if (s == 1 && d == 1 && k <= kMaxK && NC * ncol * nrow <= 2147483647LL) {
    maxpool2d_s1_kernel<<<(unsigned)(NC * ncol * nrow), kThreads, 0, stream>>>(
        xp, yp, H, W, OH, OW, (int)k, (int)p, ncol, nrow);
  } else {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t want = (y.numel() + 255) / 256;
    const int blocks = (int)std::min<int64_t>(want, (int64_t)sms * 16);
    maxpool2d_generic_kernel<<<blocks, 256, 0, stream>>>(xp, yp, NC, H, W, OH, OW, (int)k, (int)s,
                                                         (int)p, (int)d);
  }
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "maxpool2d kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = (
    "torch::Tensor maxpool2d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p, int64_t d);"
)

_ext = load_inline(
    name="kbv_kb_l1_42_maxpool2d",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["maxpool2d_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.kernel_size = int(kernel_size)
        self.stride = int(stride)
        self.padding = int(padding)
        self.dilation = int(dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.maxpool2d_forward(x, self.kernel_size, self.stride, self.padding, self.dilation)
