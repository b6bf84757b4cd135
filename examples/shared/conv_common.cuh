// Stride-1, dilation-1, zero-padded, square-kernel conv2d as an implicit GEMM:
// out[b, n, oh, ow] = epilogue(sum_k A[m, k] * w[n, k]), m = (b, oh, ow), k = (c, kh, kw).
torch::Tensor conv_common(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b1,
                          const torch::Tensor& b2, int64_t pad, int kind) {
  check_f32_cuda(x, "x");
  check_f32_cuda(w, "weight");
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4, "conv: expects NCHW input and OIHW weight");
  TORCH_CHECK(x.size(1) == w.size(1), "conv: channel mismatch");
  TORCH_CHECK(w.size(2) == w.size(3), "conv: square kernels only");
  TORCH_CHECK(pad >= 0, "conv: negative padding");
  TORCH_CHECK(x.device() == w.device(), "conv: tensors on different devices");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t NB = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = w.size(0), ks = w.size(2);
  const int64_t OH = H + 2 * pad - ks + 1, OW = W + 2 * pad - ks + 1;
  TORCH_CHECK(OH > 0 && OW > 0, "conv: input smaller than the kernel");
  const int64_t M = NB * OH * OW, K = Cin * ks * ks;
  TORCH_CHECK(M < INT32_MAX && Cout < INT32_MAX && K < INT32_MAX && H < INT32_MAX &&
                  W < INT32_MAX && pad < INT32_MAX,
              "conv: sizes too large");
  auto y = torch::empty({NB, Cout, OH, OW}, x.options());
  if (M == 0 || Cout == 0) return y;
  auto xc = x.contiguous();
  auto wc = w.contiguous();
  EpiParams epi{nullptr, nullptr, kind};
  torch::Tensor b1c, b2c;
  if (kind != kEpiNone) {
    check_f32_cuda(b1, "bias");
    TORCH_CHECK(b1.numel() == Cout && b1.device() == x.device(),
                "conv: bias must have Cout elements");
    b1c = b1.contiguous();
    epi.bias = b1c.data_ptr<float>();
  }
  if (kind == kEpiBiasScaleSigmoid || kind == kEpiBias2Tanh) {
    check_f32_cuda(b2, "second bias");
    TORCH_CHECK(b2.numel() == Cout && b2.device() == x.device(),
                "conv: second bias must have Cout elements");
    b2c = b2.contiguous();
    epi.bias2 = b2c.data_ptr<float>();
  }
  GemmArgs a{};
  a.A = xc.data_ptr<float>();
  a.B = wc.data_ptr<float>();
  a.C = y.data_ptr<float>();
  a.M = (int)M;
  a.N = (int)Cout;
  a.K = (int)K;
  a.strideA = 0;
  a.strideB = 0;
  a.strideC = 0;
  a.batch = 1;
  a.vecA = false;
  a.vecB = (K % 4 == 0) && aligned16(a.B);
  a.epi = epi;
  a.Cin = (int)Cin;
  a.H = (int)H;
  a.W = (int)W;
  a.OH = (int)OH;
  a.OW = (int)OW;
  a.pad = (int)pad;
  a.ks = (int)ks;
  if (ks == 3)
    run_tc_gemm<2, 3>(a, y);
  else
    run_tc_gemm<2, 0>(a, y);
  return y;
}
