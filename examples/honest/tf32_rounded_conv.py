# kbv-target: level2/3_Conv2d_Add_Tanh
# kbv-honest: a tensor-core kernel's arithmetic on the CPU: every input and weight rounded to TF32
# (10 mantissa bits, to nearest even, as cvt.rn.tf32), products accumulated in float32, then
# both biases and tanh. Its error is TF32's, the precision class the verified protocol admits;
# on wide-range draws it is over the normwise floor of 1e-3 in some draws, where the budget's
# rounding-sensitivity term (protocol version 4) must admit it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

// Rounds a float to TF32 (1 + 8 + 10 bits), to nearest even; infinities and NaN pass through.
static float to_tf32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) {
    bits += 0xfffu + ((bits >> 13) & 1u);
    bits &= ~0x1fffu;
  }
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

torch::Tensor tf32_conv_add_tanh(torch::Tensor x, torch::Tensor w, torch::Tensor cbias,
                                 torch::Tensor ebias) {
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1), "bad shapes");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
              "float32 only");
  TORCH_CHECK(cbias.numel() == w.size(0) && ebias.numel() == w.size(0), "bad bias shapes");
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OC = w.size(0), KH = w.size(2), KW = w.size(3);
  const int64_t OH = H - KH + 1, OW = W - KW + 1;
  TORCH_CHECK(OH > 0 && OW > 0, "input too small");
  // The operands as a tensor core reads them.
  auto xr = x.contiguous().clone();
  auto wr = w.contiguous().clone();
  for (float* p = xr.data_ptr<float>(), *e = p + xr.numel(); p != e; ++p) *p = to_tf32(*p);
  for (float* p = wr.data_ptr<float>(), *e = p + wr.numel(); p != e; ++p) *p = to_tf32(*p);
  auto cb = cbias.contiguous().to(torch::kFloat32);
  auto eb = ebias.contiguous().to(torch::kFloat32);
  auto y = torch::empty({N, OC, OH, OW}, x.options());
  const float* xp = xr.data_ptr<float>();
  const float* wp = wr.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  std::vector<float> acc(OH * OW);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oc = 0; oc < OC; ++oc) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t c = 0; c < C; ++c) {
        const float* plane = xp + (n * C + c) * H * W;
        for (int64_t kh = 0; kh < KH; ++kh) {
          for (int64_t kw = 0; kw < KW; ++kw) {
            const float wv = wp[((oc * C + c) * KH + kh) * KW + kw];
            for (int64_t oh = 0; oh < OH; ++oh) {
              const float* row = plane + (oh + kh) * W + kw;
              float* out = acc.data() + oh * OW;
              for (int64_t ow = 0; ow < OW; ++ow) out[ow] += wv * row[ow];
            }
          }
        }
      }
      const float add = cb.data_ptr<float>()[oc] + eb.data_ptr<float>()[oc];
      float* dst = yp + (n * OC + oc) * OH * OW;
      for (int64_t i = 0; i < OH * OW; ++i) dst[i] = std::tanh(acc[i] + add);
    }
  }
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_tf32_rounded_conv",
    cpp_sources=_SRC,
    functions=["tf32_conv_add_tanh"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.tf32_conv_add_tanh(x, self.conv.weight, self.conv.bias, self.bias)
