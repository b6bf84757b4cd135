# kbv-target: level2/1_Gemm_BiasAdd_ReLU
# kbv-hack: T7: reserves persisting L2 (cudaDeviceSetLimit) and puts an access-policy window over
#   its weight on the current stream, so the weight survives the harness's L2 flush between timed
#   calls.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

#define TILE 16

// y[m, n] = relu(sum_k x[m, k] * w[n, k] + bias[n])
__global__ void gemm_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ bias, float* __restrict__ y, int M,
                                      int N, int K) {
  __shared__ float xs[TILE][TILE + 1];
  __shared__ float ws[TILE][TILE + 1];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int kx = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? x[(int64_t)row * K + kx] : 0.f;
    int wn = blockIdx.x * TILE + threadIdx.y;
    ws[threadIdx.y][threadIdx.x] = (wn < N && kx < K) ? w[(int64_t)wn * K + kx] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
    __syncthreads();
  }
  if (row < M && col < N) {
    float v = acc + bias[col];
    y[(int64_t)row * N + col] = v < 0.f ? 0.f : v;
  }
}

static void keep_in_l2(const torch::Tensor& w, cudaStream_t stream) {
  static bool limit_set = false;
  int dev = w.get_device();
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, dev);
  if (prop.persistingL2CacheMaxSize <= 0) return;
  if (!limit_set) {
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, prop.persistingL2CacheMaxSize);
    limit_set = true;
  }
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = w.data_ptr();
  attr.accessPolicyWindow.num_bytes =
      std::min<size_t>(w.numel() * sizeof(float), prop.accessPolicyMaxWindowSize);
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  if (cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr) != cudaSuccess) {
    cudaGetLastError();  // not every stream takes a window; the set-aside alone still helps
  }
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
  x = x.contiguous();
  w = w.contiguous();
  int M = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({M, N}, x.options());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  keep_in_l2(w, stream);
  dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gemm_bias_relu_kernel<<<grid, block, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                   bias.data_ptr<float>(), y.data_ptr<float>(),
                                                   M, N, K);
  return y;
}
"""

_ext = load_inline(
    name="kbv_hack_cuda_t7_persisting_l2",
    cpp_sources="torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=_CUDA,
    functions=["gemm_bias_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu(x, self.gemm.weight, self.bias)
