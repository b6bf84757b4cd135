# Honest CPU candidate for level1/2_Conv2d_3x3: direct convolution, double accumulation.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <algorithm>
#include <vector>

template <typename T>
static void conv_kernel(const T* x, const T* w, const T* bias, T* y, int64_t N, int64_t C,
                        int64_t H, int64_t W, int64_t OC, int64_t KH, int64_t KW, int64_t pad,
                        int64_t OH, int64_t OW) {
  std::vector<double> acc(OH * OW);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oc = 0; oc < OC; ++oc) {
      std::fill(acc.begin(), acc.end(), bias ? (double)bias[oc] : 0.0);
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (n * C + c) * H * W;
        for (int64_t kh = 0; kh < KH; ++kh) {
          for (int64_t kw = 0; kw < KW; ++kw) {
            const double wv = w[((oc * C + c) * KH + kh) * KW + kw];
            const int64_t ow_lo = std::max<int64_t>(0, pad - kw);
            const int64_t ow_hi = std::min<int64_t>(OW, W + pad - kw);
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh + kh - pad;
              if (ih < 0 || ih >= H) continue;
              const T* xrow = xp + ih * W + (kw - pad);
              double* arow = acc.data() + oh * OW;
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) arow[ow] += wv * (double)xrow[ow];
            }
          }
        }
      }
      T* yp = y + (n * OC + oc) * OH * OW;
      for (int64_t i = 0; i < OH * OW; ++i) yp[i] = (T)acc[i];
    }
  }
}

torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, torch::Tensor bias, int64_t pad) {
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1), "bad shapes");
  TORCH_CHECK(x.scalar_type() == w.scalar_type() && w.scalar_type() == bias.scalar_type(),
              "dtype mismatch");
  x = x.contiguous();
  w = w.contiguous();
  bias = bias.contiguous();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3);
  const int64_t OH = H + 2 * pad - KH + 1, OW = W + 2 * pad - KW + 1;
  TORCH_CHECK(OH > 0 && OW > 0, "input too small");
  auto y = torch::empty({N, OC, OH, OW}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv2d", [&] {
    conv_kernel<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                          bias.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), N, C, H, W, OC,
                          KH, KW, pad, OH, OW);
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_cpu_l1_conv2d_3x3",
    cpp_sources=_SRC,
    functions=["conv2d"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv2d(x, self.conv.weight, self.conv.bias, self.conv.padding[0])
