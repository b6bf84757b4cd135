# Honest CPU candidate for level2/3_Conv2d_Add_Tanh: direct conv + both biases + tanh, fused.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <vector>

template <typename T>
static void conv_add_tanh_kernel(const T* x, const T* w, const T* cbias, const T* ebias, T* y,
                                 int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC,
                                 int64_t KH, int64_t KW, int64_t OH, int64_t OW) {
  std::vector<double> acc(OH * OW);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oc = 0; oc < OC; ++oc) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (n * C + c) * H * W;
        for (int64_t kh = 0; kh < KH; ++kh) {
          for (int64_t kw = 0; kw < KW; ++kw) {
            const double wv = w[((oc * C + c) * KH + kh) * KW + kw];
            for (int64_t oh = 0; oh < OH; ++oh) {
              const T* xrow = xp + (oh + kh) * W + kw;
              double* arow = acc.data() + oh * OW;
              for (int64_t ow = 0; ow < OW; ++ow) arow[ow] += wv * (double)xrow[ow];
            }
          }
        }
      }
      const double add = (double)cbias[oc] + (double)ebias[oc];
      T* yp = y + (n * OC + oc) * OH * OW;
      for (int64_t i = 0; i < OH * OW; ++i) yp[i] = (T)std::tanh(acc[i] + add);
    }
  }
}

torch::Tensor conv_add_tanh(torch::Tensor x, torch::Tensor w, torch::Tensor cbias,
                            torch::Tensor ebias) {
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1), "bad shapes");
  TORCH_CHECK(cbias.numel() == w.size(0) && ebias.numel() == w.size(0), "bad bias shapes");
  TORCH_CHECK(x.scalar_type() == w.scalar_type() && w.scalar_type() == cbias.scalar_type() &&
                  cbias.scalar_type() == ebias.scalar_type(),
              "dtype mismatch");
  x = x.contiguous();
  w = w.contiguous();
  cbias = cbias.contiguous();
  ebias = ebias.contiguous();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3);
  const int64_t OH = H - KH + 1, OW = W - KW + 1;
  TORCH_CHECK(OH > 0 && OW > 0, "input too small");
  auto y = torch::empty({N, OC, OH, OW}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_add_tanh", [&] {
    conv_add_tanh_kernel<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                                   cbias.data_ptr<scalar_t>(), ebias.data_ptr<scalar_t>(),
                                   y.data_ptr<scalar_t>(), N, C, H, W, OC, KH, KW, OH, OW);
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_cpu_l2_conv_add_tanh",
    cpp_sources=_SRC,
    functions=["conv_add_tanh"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_add_tanh(x, self.conv.weight, self.conv.bias, self.bias)
