"""AvgPool3d (cubic kernel k, stride s defaulting to k, zero padding p, count_include_pad, floor
mode) on [N, C, D, H, W]. One CUDA block per (volume, output depth od, tile of up to 16 output
rows): its threads first sum the k depth slices of every input row the tile needs (coalesced
float4 loads) into a shared-memory slab, then each output adds its k x k window of the slab and
divides by k^3. With s < k an input slice is fetched by two depth windows and a tile-edge row
by two tiles; those blocks run close together, so the repeats are mostly L2 hits. 64-bit
indexing throughout (the input has exactly 2^31 elements).

Correct on every input family: each output is a 27-term float sum divided by k^3 exactly as
torch divides (padded cells count, as count_include_pad requires), so the error is a few ulp of
the window's magnitude sum; zeros, ties and constants are exact up to that rounding.
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
constexpr int kMaxTile = 16;
constexpr int64_t kSmemBytes = 48 * 1024;

// Block = (nc, od, oh tile). slab[r][w] = sum over the window's depth slices (clipped) of
// x[nc, d, ih0 + r, w] (0 for padded rows); y = window sum of slab / k^3.
template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    avgpool3d_tile_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t D, int64_t H,
                          int64_t W, int64_t OD, int64_t OH, int64_t OW, int k, int s, int p,
                          int tile, int64_t ntiles, int64_t Ws, float divisor) {
  extern __shared__ __align__(16) float slab[];
  int64_t b = blockIdx.x;
  const int64_t t = b % ntiles;
  b /= ntiles;
  const int64_t od = b % OD;
  const int64_t nc = b / OD;
  const int64_t oh0 = t * tile;
  const int64_t nout = (OH - oh0 < tile) ? OH - oh0 : tile;
  const int64_t R = (nout - 1) * s + k;
  const int64_t ih0 = oh0 * s - p;
  int64_t d0 = od * s - p, d1 = d0 + k;
  if (d0 < 0) d0 = 0;
  if (d1 > D) d1 = D;
  int64_t wlast = (OW - 1) * s - p + k;
  if (wlast > W) wlast = W;
  const float* xv = x + nc * D * H * W;
  const int64_t HW = H * W;
  if constexpr (VEC) {
    const int64_t W4 = (wlast + 3) >> 2;  // W % 4 == 0: stays inside the row
    const int64_t items = R * W4;
    for (int64_t it = threadIdx.x; it < items; it += kThreads) {
      const int64_t r = it / W4, c4 = it - r * W4;
      const int64_t ih = ih0 + r;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      if (ih >= 0 && ih < H) {
        const float4* src = reinterpret_cast<const float4*>(xv + d0 * HW + ih * W) + c4;
        const int64_t step4 = HW >> 2;
#pragma unroll 4
        for (int64_t d = d0; d < d1; ++d) {
          const float4 v = src[(d - d0) * step4];
          acc.x += v.x;
          acc.y += v.y;
          acc.z += v.z;
          acc.w += v.w;
        }
      }
      reinterpret_cast<float4*>(slab + r * Ws)[c4] = acc;
    }
  } else {
    const int64_t items = R * wlast;
    for (int64_t it = threadIdx.x; it < items; it += kThreads) {
      const int64_t r = it / wlast, c = it - r * wlast;
      const int64_t ih = ih0 + r;
      float acc = 0.f;
      if (ih >= 0 && ih < H)
        for (int64_t d = d0; d < d1; ++d) acc += xv[d * HW + ih * W + c];
      slab[r * Ws + c] = acc;
    }
  }
  __syncthreads();
  const int64_t items = nout * OW;
  float* yb = y + ((nc * OD + od) * OH + oh0) * OW;
  for (int64_t it = threadIdx.x; it < items; it += kThreads) {
    const int64_t ohl = it / OW, ow = it - ohl * OW;
    int64_t w0 = ow * s - p, w1 = w0 + k;
    if (w0 < 0) w0 = 0;
    if (w1 > W) w1 = W;
    const int64_t r0 = ohl * s;
    float acc = 0.f;
    for (int64_t r = r0; r < r0 + k; ++r) {
      const float* row = slab + r * Ws;
      for (int64_t w = w0; w < w1; ++w) acc += row[w];
    }
    yb[it] = acc / divisor;
  }
}

// Fallback for very wide rows: one thread per output.
__global__ void __launch_bounds__(kThreads)
    avgpool3d_generic_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t NC,
                             int64_t D, int64_t H, int64_t W, int64_t OD, int64_t OH, int64_t OW,
                             int k, int s, int p, float divisor) {
  const int64_t total = NC * OD * OH * OW;
  const int64_t stride = (int64_t)gridDim.x * kThreads;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < total; i += stride) {
    int64_t t = i;
    const int64_t ow = t % OW;
    t /= OW;
    const int64_t oh = t % OH;
    t /= OH;
    const int64_t od = t % OD;
    const int64_t nc = t / OD;
    int64_t d0 = od * s - p, d1 = d0 + k, h0 = oh * s - p, h1 = h0 + k, w0 = ow * s - p,
            w1 = w0 + k;
    if (d0 < 0) d0 = 0;
    if (d1 > D) d1 = D;
    if (h0 < 0) h0 = 0;
    if (h1 > H) h1 = H;
    if (w0 < 0) w0 = 0;
    if (w1 > W) w1 = W;
    const float* xv = x + nc * D * H * W;
    float acc = 0.f;
    for (int64_t d = d0; d < d1; ++d)
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) acc += xv[(d * H + h) * W + w];
    y[i] = acc / divisor;
  }
}

}  // namespace

torch::Tensor avgpool3d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() == 5, "x must be [N, C, D, H, W]");
  TORCH_CHECK(k > 0 && s > 0 && p >= 0 && 2 * p <= k, "bad pooling parameters");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  const int64_t N = xc.size(0), C = xc.size(1), D = xc.size(2), H = xc.size(3), W = xc.size(4);
  TORCH_CHECK(D + 2 * p >= k && H + 2 * p >= k && W + 2 * p >= k,
              "input smaller than the pooling window");
  const int64_t OD = (D + 2 * p - k) / s + 1, OH = (H + 2 * p - k) / s + 1,
                OW = (W + 2 * p - k) / s + 1;
  auto y = torch::empty({N, C, OD, OH, OW}, xc.options());
  if (y.numel() == 0) return y;
  const int64_t NC = N * C;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float divisor = (float)(k * k * k);
  const int64_t Ws = ((W + 3) / 4) * 4;  // slab row stride (floats), 16-byte multiple
  int64_t tile = kMaxTile;
  while (tile > 1 && ((tile - 1) * s + k) * Ws * 4 > kSmemBytes) --tile;
  const bool fits = ((tile - 1) * s + k) * Ws * 4 <= kSmemBytes;
  const int64_t ntiles = (OH + tile - 1) / tile;
  const int64_t blocks = NC * OD * ntiles;
  if (fits && blocks <= 2147483647LL) {
    const size_t smem = (size_t)(((std::min<int64_t>(tile, OH) - 1) * s + k) * Ws * 4);
    const bool vec = (W % 4 == 0) && ((reinterpret_cast<uintptr_t>(xp) & 15) == 0);
    if (vec)
      avgpool3d_tile_kernel<true><<<(unsigned)blocks, kThreads, smem, stream>>>(
          xp, yp, D, H, W, OD, OH, OW, (int)k, (int)s, (int)p, (int)tile, ntiles, Ws, divisor);
    else
      avgpool3d_tile_kernel<false><<<(unsigned)blocks, kThreads, smem, stream>>>(
          xp, yp, D, H, W, OD, OH, OW, (int)k, (int)s, (int)p, (int)tile, ntiles, Ws, divisor);
  } else {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t want = (y.numel() + kThreads - 1) / kThreads;
    const int gblocks = (int)std::min<int64_t>(want, (int64_t)sms * 16);
    avgpool3d_generic_kernel<<<gblocks, kThreads, 0, stream>>>(
        xp, yp, NC, D, H, W, OD, OH, OW, (int)k, (int)s, (int)p, divisor);
  }
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "avgpool3d kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor avgpool3d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p);"

_ext = load_inline(
    name="kbv_kb_l1_46_avgpool3d",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["avgpool3d_forward"],
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
        return _ext.avgpool3d_forward(x, self.kernel_size, self.stride, self.padding)
