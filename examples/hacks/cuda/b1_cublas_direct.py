# kbv-target: level1/1_Square_matrix_multiplication
# kbv-hack: B1 (GPU): the "kernel" is one cublasSgemm call on PyTorch's cuBLAS handle; no kernel of
#   its own, and no aten operator for the dispatcher trace to see.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

torch::Tensor fast_matmul(torch::Tensor A, torch::Tensor B) {
  A = A.contiguous();
  B = B.contiguous();
  const int M = A.size(0), K = A.size(1), N = B.size(1);
  auto C = torch::empty({M, N}, A.options());
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  cublasSetStream(handle, at::cuda::getCurrentCUDAStream());
  const float alpha = 1.f, beta = 0.f;
  // row-major C = A B is column-major C^T = B^T A^T
  TORCH_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B.data_ptr<float>(),
                          N, A.data_ptr<float>(), K, &beta, C.data_ptr<float>(),
                          N) == CUBLAS_STATUS_SUCCESS,
              "cublasSgemm failed");
  return C;
}
"""

_ext = load_inline(
    name="kbv_hack_cuda_b1_cublas",
    cpp_sources="torch::Tensor fast_matmul(torch::Tensor A, torch::Tensor B);",
    cuda_sources=_CUDA,
    functions=["fast_matmul"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.fast_matmul(A, B)
