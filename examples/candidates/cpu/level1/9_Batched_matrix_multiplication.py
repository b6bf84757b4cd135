# Honest CPU candidate for level1/9_Batched_matrix_multiplication: naive bmm, double accumulation.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <vector>

template <typename T>
static void bmm_kernel(const T* a, const T* b, T* c, int64_t Bn, int64_t M, int64_t K,
                       int64_t N) {
  std::vector<double> acc(N);
  for (int64_t bi = 0; bi < Bn; ++bi) {
    const T* ab = a + bi * M * K;
    const T* bb = b + bi * K * N;
    T* cb = c + bi * M * N;
    for (int64_t i = 0; i < M; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < K; ++k) {
        const double av = ab[i * K + k];
        const T* brow = bb + k * N;
        for (int64_t j = 0; j < N; ++j) acc[j] += av * (double)brow[j];
      }
      for (int64_t j = 0; j < N; ++j) cb[i * N + j] = (T)acc[j];
    }
  }
}

torch::Tensor bmm(torch::Tensor A, torch::Tensor B) {
  TORCH_CHECK(A.dim() == 3 && B.dim() == 3 && A.size(0) == B.size(0) && A.size(2) == B.size(1),
              "bad shapes");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "dtype mismatch");
  A = A.contiguous();
  B = B.contiguous();
  auto C = torch::empty({A.size(0), A.size(1), B.size(2)}, A.options());
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "bmm", [&] {
    bmm_kernel<scalar_t>(A.data_ptr<scalar_t>(), B.data_ptr<scalar_t>(), C.data_ptr<scalar_t>(),
                         A.size(0), A.size(1), A.size(2), B.size(2));
  });
  return C;
}
"""

_ext = load_inline(
    name="kbv_cpu_l1_bmm",
    cpp_sources=_SRC,
    functions=["bmm"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.bmm(A, B)
