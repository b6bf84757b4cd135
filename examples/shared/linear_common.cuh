// y = epilogue(x @ w^T) for x [..., K], w [N, K]; per-column vectors b1, b2 of N elements.
torch::Tensor linear_common(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b1,
                            const torch::Tensor& b2, int kind) {
  check_f32_cuda(x, "x");
  check_f32_cuda(w, "weight");
  TORCH_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1), "linear: shape mismatch");
  TORCH_CHECK(x.device() == w.device(), "linear: tensors on different devices");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = w.size(0), K = w.size(1);
  std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes.back() = N;
  const int64_t M = K > 0 ? x.numel() / K : 0;
  TORCH_CHECK(M < INT32_MAX && N < INT32_MAX && K < INT32_MAX, "linear: sizes too large");
  auto y = torch::empty({M, N}, x.options());
  if (M == 0 || N == 0) return y.view(out_sizes);
  auto x2 = x.reshape({M, K}).contiguous();
  auto wc = w.contiguous();
  EpiParams epi{nullptr, nullptr, kind};
  torch::Tensor b1c, b2c;
  if (kind != kEpiNone) {
    check_f32_cuda(b1, "bias");
    TORCH_CHECK(b1.numel() == N && b1.device() == x.device(), "linear: bias must have N elements");
    b1c = b1.contiguous();
    epi.bias = b1c.data_ptr<float>();
  }
  if (kind == kEpiBiasScaleSigmoid || kind == kEpiBias2Tanh) {
    check_f32_cuda(b2, "second vector");
    TORCH_CHECK(b2.numel() == N && b2.device() == x.device(),
                "linear: second vector must have N elements");
    b2c = b2.contiguous();
    epi.bias2 = b2c.data_ptr<float>();
  }
  GemmArgs a{};
  a.A = x2.data_ptr<float>();
  a.B = wc.data_ptr<float>();
  a.C = y.data_ptr<float>();
  a.M = (int)M;
  a.N = (int)N;
  a.K = (int)K;
  a.strideA = 0;
  a.strideB = 0;
  a.strideC = 0;
  a.batch = 1;
  a.vecA = (K % 4 == 0) && aligned16(a.A);
  a.vecB = (K % 4 == 0) && aligned16(a.B);
  a.epi = epi;
  run_tc_gemm<1, 0>(a, y);
  return y.view(out_sizes);
}
