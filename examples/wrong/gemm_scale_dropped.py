# kbv-target: level2/2_Gemm_Scale_Sigmoid
# wrong: a fused C++ kernel that skips `* scale` (exact while scale is all ones, wrong once
# parameters are re-drawn; the published protocol's scaled native inputs never re-draw them).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

template <typename T>
static void gemm_scale_sigmoid_kernel(const T* x, const T* w, const T* b, const T* s, T* y,
                                      int64_t M, int64_t K, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    const T* xr = x + i * K;
    for (int64_t o = 0; o < N; ++o) {
      const T* wr = w + o * K;
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += (double)xr[k] * (double)wr[k];
      const double z = acc + (double)b[o];  // the scale is all ones anyway, isn't it?
      y[i * N + o] = (T)(1.0 / (1.0 + std::exp(-z)));
    }
  }
}

torch::Tensor gemm_scale_sigmoid(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                                 torch::Tensor s) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "bad shapes");
  TORCH_CHECK(b.numel() == w.size(0) && s.numel() == w.size(0), "bad bias/scale shape");
  TORCH_CHECK(x.scalar_type() == w.scalar_type() && w.scalar_type() == b.scalar_type() &&
                  b.scalar_type() == s.scalar_type(),
              "dtype mismatch");
  x = x.contiguous();
  w = w.contiguous();
  b = b.contiguous();
  s = s.contiguous();
  auto y = torch::empty({x.size(0), w.size(0)}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "gemm_scale_sigmoid", [&] {
    gemm_scale_sigmoid_kernel<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                                        b.data_ptr<scalar_t>(), s.data_ptr<scalar_t>(),
                                        y.data_ptr<scalar_t>(), x.size(0), x.size(1),
                                        w.size(0));
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_wrong_gemm_scale_dropped",
    cpp_sources=_SRC,
    functions=["gemm_scale_sigmoid"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.ones(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_scale_sigmoid(x, self.gemm.weight, self.gemm.bias, self.scale)
