# Honest CPU candidate for level3/1_MLP: all layers in one C++ call, activations kept in double.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <vector>

template <typename T>
static void linear_layer(const std::vector<double>& in, int64_t M, int64_t K, const T* w,
                         const T* b, int64_t N, bool relu, std::vector<double>& out) {
  out.assign(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i) {
    const double* xr = in.data() + i * K;
    for (int64_t o = 0; o < N; ++o) {
      const T* wr = w + o * K;
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += xr[k] * (double)wr[k];
      acc += (double)b[o];
      out[i * N + o] = (relu && acc < 0.0) ? 0.0 : acc;
    }
  }
}

torch::Tensor mlp(torch::Tensor x, std::vector<torch::Tensor> weights,
                  std::vector<torch::Tensor> biases) {
  TORCH_CHECK(x.dim() == 2, "expected a 2-D input");
  TORCH_CHECK(!weights.empty() && weights.size() == biases.size(), "bad layer lists");
  x = x.contiguous();
  const int64_t M = x.size(0);
  int64_t K = x.size(1);
  for (size_t l = 0; l < weights.size(); ++l) {
    TORCH_CHECK(weights[l].dim() == 2 && weights[l].size(1) == K, "bad weight shape");
    TORCH_CHECK(biases[l].numel() == weights[l].size(0), "bad bias shape");
    TORCH_CHECK(weights[l].scalar_type() == x.scalar_type() &&
                    biases[l].scalar_type() == x.scalar_type(),
                "dtype mismatch");
    weights[l] = weights[l].contiguous();
    biases[l] = biases[l].contiguous();
    K = weights[l].size(0);
  }
  auto y = torch::empty({M, K}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mlp", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    std::vector<double> cur(xp, xp + x.numel()), next;
    int64_t k = x.size(1);
    for (size_t l = 0; l < weights.size(); ++l) {
      const int64_t n = weights[l].size(0);
      linear_layer<scalar_t>(cur, M, k, weights[l].data_ptr<scalar_t>(),
                             biases[l].data_ptr<scalar_t>(), n, l + 1 < weights.size(), next);
      cur.swap(next);
      k = n;
    }
    scalar_t* yp = y.data_ptr<scalar_t>();
    for (int64_t i = 0; i < M * k; ++i) yp[i] = (scalar_t)cur[i];
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_cpu_l3_mlp",
    cpp_sources=_SRC,
    functions=["mlp"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linears = [m for m in self.network if isinstance(m, nn.Linear)]
        return _ext.mlp(x, [m.weight for m in linears], [m.bias for m in linears])
