# Honest CUDA candidate for level2/1_Gemm_BiasAdd_ReLU: TF32 tensor-core GEMM, fused bias + ReLU.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Operand precision of the tensor-core GEMM: 1 = TF32 (the precision of the TF32
# cuBLAS/cuDNN baseline), 3 = 3xTF32 split (close to FP32 accuracy, ~3x the tensor-core work).
_TF32_PASSES = 1

_CUDA_BODY = r"""
// BEGIN shared examples/shared/tf32_gemm.cuh: written by scripts/gen_examples.py, edit there
#ifndef KBV_SPLIT_TF32
#define KBV_SPLIT_TF32 0
#endif
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

// ---- TF32 tensor-core tiled GEMM / implicit-GEMM convolution (wmma m16n16k8) ----
// C[M,N] = A[M,K] * B[K,N] with FP32 accumulation. Operands are rounded to TF32
// (round-to-nearest) once, when a tile is staged in shared memory; with SPLIT the
// 3xTF32 scheme (hi*hi + hi*lo + lo*hi) gives close to FP32 accuracy instead.
// MODE 0: A row-major [M,K], B row-major [K,N]            (matmul / bmm)
// MODE 1: A row-major [M,K], B row-major [N,K] (B^T)      (nn.Linear weight)
// MODE 2: A = implicit im2col of an NCHW input (stride 1), B = weight [Cout, Cin*ks*ks],
//         output written as NCHW                          (conv2d)
// Every tile load is bounds-checked (zero fill), every store is bounds-checked, so any
// M, N, K works (tiles need not divide the sizes).
namespace {

using namespace nvcuda;

constexpr int kThreads = 256;  // 8 warps
constexpr int kBK = 32;
constexpr int kPad = 4;        // shared-memory row padding (floats)
constexpr int kScrLd = 20;     // epilogue scratch leading dimension

enum EpiKind : int {
  kEpiNone = 0,
  kEpiBias = 1,              // v + bias[n]
  kEpiBiasRelu = 2,          // relu(v + bias[n])
  kEpiBiasScaleSigmoid = 3,  // sigmoid((v + bias[n]) * bias2[n])
  kEpiBias2Tanh = 4          // tanh((v + bias[n]) + bias2[n])
};

struct EpiParams {
  const float* bias;
  const float* bias2;
  int kind;
};

struct GemmArgs {
  const float* A;
  const float* B;
  float* C;
  int M, N, K;
  int64_t strideA, strideB, strideC;  // per batch entry (elements); strideC also per split
  int batch;
  int splits;           // split-K factor (MODE 0/1 with batch == 1 only)
  int ktiles_per_split;
  bool vecA, vecB;      // 16-byte vector loads allowed
  EpiParams epi;
  // convolution geometry (MODE 2)
  int Cin, H, W, OH, OW, pad, ks;
};

__device__ __forceinline__ float apply_epi(float v, int n, const EpiParams& e) {
  switch (e.kind) {
    case kEpiBias:
      return v + e.bias[n];
    case kEpiBiasRelu: {
      const float t = v + e.bias[n];
      return t < 0.f ? 0.f : t;  // keeps NaN, like torch.relu
    }
    case kEpiBiasScaleSigmoid: {
      const float t = (v + e.bias[n]) * e.bias2[n];
      return 1.f / (1.f + expf(-t));
    }
    case kEpiBias2Tanh:
      return tanhf((v + e.bias[n]) + e.bias2[n]);
    default:
      return v;
  }
}

__device__ __forceinline__ float to_tf32(float v) { return wmma::__float_to_tf32(v); }

template <int MODE, int BM, int BN>
struct SmemLayout {
  static constexpr int kLdA = (MODE == 2) ? (BM + kPad) : (kBK + kPad);
  static constexpr int kSizeA = (MODE == 2) ? kBK * (BM + kPad) : BM * (kBK + kPad);
  static constexpr int kLdB = (MODE == 0) ? (BN + kPad) : (kBK + kPad);
  static constexpr int kSizeB = (MODE == 0) ? kBK * (BN + kPad) : BN * (kBK + kPad);
  static constexpr int kTotal = kSizeA + kSizeB;
};

template <int BM, int BN, int WM, int WN, int MODE, int KS_T, bool SPLIT>
__global__ void __launch_bounds__(kThreads) tc_gemm_kernel(const GemmArgs args) {
  static_assert(WM * WN == kThreads / 32, "8 warps");
  static_assert(BM % (16 * WM) == 0 && BN % (16 * WN) == 0, "warp tiling");
  static_assert(BM % 32 == 0 && BN % 32 == 0 && kThreads % BM == 0, "load tiling");
  using L = SmemLayout<MODE, BM, BN>;
  static_assert(L::kTotal >= (kThreads / 32) * 16 * kScrLd, "scratch fits");
  constexpr int WTM = BM / WM, WTN = BN / WN;
  constexpr int FM = WTM / 16, FN = WTN / 16;
  constexpr int A_VEC = BM / 32;          // float4 per thread (MODE 0/1)
  constexpr int A_SCL = BM * kBK / kThreads;  // scalars per thread (MODE 2)
  constexpr int A_KSTEP = kThreads / BM;      // (MODE 2)
  constexpr int B_VEC = BN / 32;          // float4 per thread (all modes)

  __shared__ __align__(128) float smem[L::kTotal];
  float* As = smem;
  float* Bs = smem + L::kSizeA;

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp / WN, wn = warp % WN;
  const int M = args.M, N = args.N, K = args.K;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int KT = (K + kBK - 1) / kBK;

  // MODE 2: this thread always stages the same output pixel (row m of the implicit A).
  const int conv_ml = tid % BM;
  const int conv_kl0 = tid / BM;
  bool conv_mvalid = false;
  int conv_oh = 0, conv_ow = 0;
  const float* conv_xb = args.A;
  int64_t conv_hw = 0;
  int ksz = 1;
  if constexpr (MODE == 2) {
    ksz = KS_T > 0 ? KS_T : args.ks;
    conv_hw = (int64_t)args.H * args.W;
    const int P = args.OH * args.OW;
    const int m = m0 + conv_ml;
    conv_mvalid = m < M;
    if (conv_mvalid) {
      const int b = m / P;
      const int p = m - b * P;
      conv_oh = p / args.OW;
      conv_ow = p - conv_oh * args.OW;
      conv_xb = args.A + (int64_t)b * args.Cin * conv_hw;
    }
  }

  const int total_z = args.batch * args.splits;
  for (int z = blockIdx.z; z < total_z; z += gridDim.z) {
    const int bidx = z / args.splits;
    const int split = z - bidx * args.splits;
    const float* __restrict__ Ab = args.A + (int64_t)bidx * args.strideA;
    const float* __restrict__ Bb = args.B + (int64_t)bidx * args.strideB;
    float* __restrict__ Cb = args.C + (int64_t)z * args.strideC;
    const int kt_begin = split * args.ktiles_per_split;
    const int kt_end = min(KT, kt_begin + args.ktiles_per_split);

    float ra_s[(MODE == 2) ? A_SCL : 1];
    float4 ra[(MODE == 2) ? 1 : A_VEC];
    float4 rb[B_VEC];

    auto load_tiles = [&](int kt) {
      const int k0 = kt * kBK;
      if constexpr (MODE == 2) {
        const int kk2 = ksz * ksz;
#pragma unroll
        for (int i = 0; i < A_SCL; ++i) {
          const int gk = k0 + conv_kl0 + i * A_KSTEP;
          float v = 0.f;
          if (conv_mvalid && gk < K) {
            const int c = gk / kk2;
            const int r = gk - c * kk2;
            const int kh = r / ksz;
            const int kw = r - kh * ksz;
            const int ih = conv_oh + kh - args.pad;
            const int iw = conv_ow + kw - args.pad;
            if (ih >= 0 && ih < args.H && iw >= 0 && iw < args.W)
              v = conv_xb[(int64_t)c * conv_hw + (int64_t)ih * args.W + iw];
          }
          ra_s[i] = v;
        }
      } else {
#pragma unroll
        for (int i = 0; i < A_VEC; ++i) {
          const int idx = tid + i * kThreads;
          const int r = idx >> 3;
          const int c = (idx & 7) * 4;
          const int gm = m0 + r, gk = k0 + c;
          float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
          if (gm < M) {
            const float* p = Ab + (int64_t)gm * K + gk;
            if (args.vecA && gk + 3 < K) {
              v = *reinterpret_cast<const float4*>(p);
            } else {
              if (gk < K) v.x = p[0];
              if (gk + 1 < K) v.y = p[1];
              if (gk + 2 < K) v.z = p[2];
              if (gk + 3 < K) v.w = p[3];
            }
          }
          ra[i] = v;
        }
      }
      if constexpr (MODE == 0) {
        // B row-major [K, N]: tile kBK x BN, float4 along n.
#pragma unroll
        for (int i = 0; i < B_VEC; ++i) {
          const int idx = tid + i * kThreads;
          const int r = idx / (BN / 4);
          const int c = (idx % (BN / 4)) * 4;
          const int gk = k0 + r, gn = n0 + c;
          float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
          if (gk < K) {
            const float* p = Bb + (int64_t)gk * N + gn;
            if (args.vecB && gn + 3 < N) {
              v = *reinterpret_cast<const float4*>(p);
            } else {
              if (gn < N) v.x = p[0];
              if (gn + 1 < N) v.y = p[1];
              if (gn + 2 < N) v.z = p[2];
              if (gn + 3 < N) v.w = p[3];
            }
          }
          rb[i] = v;
        }
      } else {
        // B stored [N, K] row-major: tile BN x kBK, float4 along k.
#pragma unroll
        for (int i = 0; i < B_VEC; ++i) {
          const int idx = tid + i * kThreads;
          const int r = idx >> 3;
          const int c = (idx & 7) * 4;
          const int gn = n0 + r, gk = k0 + c;
          float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
          if (gn < N) {
            const float* p = Bb + (int64_t)gn * K + gk;
            if (args.vecB && gk + 3 < K) {
              v = *reinterpret_cast<const float4*>(p);
            } else {
              if (gk < K) v.x = p[0];
              if (gk + 1 < K) v.y = p[1];
              if (gk + 2 < K) v.z = p[2];
              if (gk + 3 < K) v.w = p[3];
            }
          }
          rb[i] = v;
        }
      }
    };

    auto cvt4 = [](float4 v) {
      if constexpr (!SPLIT) {
        v.x = to_tf32(v.x);
        v.y = to_tf32(v.y);
        v.z = to_tf32(v.z);
        v.w = to_tf32(v.w);
      }
      return v;
    };

    auto store_tiles = [&]() {
      if constexpr (MODE == 2) {
#pragma unroll
        for (int i = 0; i < A_SCL; ++i) {
          const int kl = conv_kl0 + i * A_KSTEP;
          As[kl * L::kLdA + conv_ml] = SPLIT ? ra_s[i] : to_tf32(ra_s[i]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < A_VEC; ++i) {
          const int idx = tid + i * kThreads;
          const int r = idx >> 3;
          const int c = (idx & 7) * 4;
          *reinterpret_cast<float4*>(As + r * L::kLdA + c) = cvt4(ra[i]);
        }
      }
      if constexpr (MODE == 0) {
#pragma unroll
        for (int i = 0; i < B_VEC; ++i) {
          const int idx = tid + i * kThreads;
          const int r = idx / (BN / 4);
          const int c = (idx % (BN / 4)) * 4;
          *reinterpret_cast<float4*>(Bs + r * L::kLdB + c) = cvt4(rb[i]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < B_VEC; ++i) {
          const int idx = tid + i * kThreads;
          const int r = idx >> 3;
          const int c = (idx & 7) * 4;
          *reinterpret_cast<float4*>(Bs + r * L::kLdB + c) = cvt4(rb[i]);
        }
      }
    };

    using ALayout = typename std::conditional<MODE == 2, wmma::col_major, wmma::row_major>::type;
    using BLayout = typename std::conditional<MODE == 0, wmma::row_major, wmma::col_major>::type;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

    if (kt_begin < kt_end) {
      load_tiles(kt_begin);
      store_tiles();
      __syncthreads();
    }
    for (int kt = kt_begin; kt < kt_end; ++kt) {
      const bool has_next = kt + 1 < kt_end;
      if (has_next) load_tiles(kt + 1);  // global loads overlap the MMAs below
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, ALayout> af[FM];
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, BLayout> bf[FN];
#pragma unroll
        for (int i = 0; i < FM; ++i) {
          const int mr = wm * WTM + i * 16;
          const float* pa = (MODE == 2) ? (As + kk * L::kLdA + mr) : (As + mr * L::kLdA + kk);
          wmma::load_matrix_sync(af[i], pa, L::kLdA);
        }
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          const int nc = wn * WTN + j * 16;
          const float* pb = (MODE == 0) ? (Bs + kk * L::kLdB + nc) : (Bs + nc * L::kLdB + kk);
          wmma::load_matrix_sync(bf[j], pb, L::kLdB);
        }
        if constexpr (SPLIT) {
          wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, ALayout> al[FM];
          wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, BLayout> bl[FN];
#pragma unroll
          for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int t = 0; t < af[i].num_elements; ++t) {
              const float v = af[i].x[t];
              const float hi = to_tf32(v);
              af[i].x[t] = hi;
              al[i].x[t] = to_tf32(v - hi);
            }
#pragma unroll
          for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int t = 0; t < bf[j].num_elements; ++t) {
              const float v = bf[j].x[t];
              const float hi = to_tf32(v);
              bf[j].x[t] = hi;
              bl[j].x[t] = to_tf32(v - hi);
            }
#pragma unroll
          for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) {
              wmma::mma_sync(acc[i][j], al[i], bf[j], acc[i][j]);
              wmma::mma_sync(acc[i][j], af[i], bl[j], acc[i][j]);
              wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
            }
        } else {
#pragma unroll
          for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }
      }
      __syncthreads();  // everyone is done reading this stage
      if (has_next) {
        store_tiles();
        __syncthreads();
      }
    }

    // Epilogue: each warp bounces its 16x16 accumulators through shared scratch so the
    // element -> (row, col) mapping is known, then applies the fused op and stores with
    // bounds checks.
    __syncthreads();
    float* scratch = smem + warp * (16 * kScrLd);
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        wmma::store_matrix_sync(scratch, acc[i][j], kScrLd, wmma::mem_row_major);
        __syncwarp();
        const int rbase = m0 + wm * WTM + i * 16;
        const int cbase = n0 + wn * WTN + j * 16;
        if constexpr (MODE == 2) {
          const int P = args.OH * args.OW;
          for (int e = lane; e < 256; e += 32) {
            const int r = e & 15, c = e >> 4;  // consecutive lanes -> consecutive pixels
            const int gm = rbase + r, gn = cbase + c;
            if (gm < M && gn < N) {
              const int b = gm / P;
              const int p = gm - b * P;
              Cb[((int64_t)b * N + gn) * P + p] = apply_epi(scratch[r * kScrLd + c], gn, args.epi);
            }
          }
        } else {
          for (int e = lane; e < 256; e += 32) {
            const int r = e >> 4, c = e & 15;
            const int gm = rbase + r, gn = cbase + c;
            if (gm < M && gn < N)
              Cb[(int64_t)gm * N + gn] = apply_epi(scratch[r * kScrLd + c], gn, args.epi);
          }
        }
        __syncwarp();
      }
    }
    __syncthreads();  // scratch aliases the operand tiles of the next z iteration
  }
}

__global__ void splitk_reduce_kernel(const float* __restrict__ ws, float* __restrict__ C,
                                     int64_t MN, int N, int splits, EpiParams epi) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < MN; i += stride) {
    float s = 0.f;
    for (int z = 0; z < splits; ++z) s += ws[(int64_t)z * MN + i];
    C[i] = apply_epi(s, (int)(i % N), epi);
  }
}

inline int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, what, " launch failed: ", cudaGetErrorString(err));
}

template <int BM, int BN, int WM, int WN, int MODE, int KS_T>
void launch_cfg(const GemmArgs& a, cudaStream_t stream) {
  const int64_t gx = cdiv64(a.M, BM), gy = cdiv64(a.N, BN);
  TORCH_CHECK(gx <= 2147483647LL && gy <= 65535, "GEMM too large for the grid");
  const int64_t gz = std::min<int64_t>((int64_t)a.batch * a.splits, 65535);
  if (gx == 0 || gy == 0 || gz == 0) return;
  dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)gz);
  tc_gemm_kernel<BM, BN, WM, WN, MODE, KS_T, (KBV_SPLIT_TF32 != 0)>
      <<<grid, kThreads, 0, stream>>>(a);
  check_launch("tc_gemm_kernel");
}

// Picks a tile shape (and split-K for small non-batched GEMMs), launches, and for split-K
// reduces the partial products and applies the epilogue. `out` is the final output.
template <int MODE, int KS_T>
void run_tc_gemm(GemmArgs a, const torch::Tensor& out) {
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t target = 2LL * sms;
  const int64_t KT = cdiv64(a.K, kBK);
  a.splits = 1;
  a.ktiles_per_split = (int)std::max<int64_t>(KT, 1);
  const int64_t t128x128 = cdiv64(a.M, 128) * cdiv64(a.N, 128) * a.batch;
  const int64_t t128x64 = cdiv64(a.M, 128) * cdiv64(a.N, 64) * a.batch;
  if (a.N > 64 && t128x128 >= target) {
    launch_cfg<128, 128, 2, 4, MODE, KS_T>(a, stream);
    return;
  }
  if (a.N <= 64 && t128x64 >= target) {
    launch_cfg<128, 64, 4, 2, MODE, KS_T>(a, stream);
    return;
  }
  const int64_t t64 = cdiv64(a.M, 64) * cdiv64(a.N, 64) * a.batch;
  int64_t splits = 1;
  if (MODE != 2 && a.batch == 1 && t64 < target) {
    splits = std::min<int64_t>({cdiv64(target, t64), KT / 4, 16});
    splits = std::max<int64_t>(splits, 1);
  }
  if (splits <= 1) {
    launch_cfg<64, 64, 2, 4, MODE, KS_T>(a, stream);
    return;
  }
  const int64_t ktps = cdiv64(KT, splits);
  splits = cdiv64(KT, ktps);
  const int64_t MN = (int64_t)a.M * a.N;
  auto ws = torch::empty({splits, (int64_t)a.M, (int64_t)a.N}, out.options());
  GemmArgs p = a;
  p.C = ws.data_ptr<float>();
  p.strideC = MN;
  p.splits = (int)splits;
  p.ktiles_per_split = (int)ktps;
  p.epi = EpiParams{nullptr, nullptr, kEpiNone};
  launch_cfg<64, 64, 2, 4, MODE, KS_T>(p, stream);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(cdiv64(MN, threads), 8LL * sms);
  splitk_reduce_kernel<<<(unsigned)blocks, threads, 0, stream>>>(p.C, a.C, MN, a.N, (int)splits,
                                                                 a.epi);
  check_launch("splitk_reduce_kernel");
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

inline void check_f32_cuda(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, name, " must be float32");
}

}  // namespace
// END shared examples/shared/tf32_gemm.cuh

// BEGIN shared examples/shared/linear_common.cuh: written by scripts/gen_examples.py, edit there
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
// END shared examples/shared/linear_common.cuh

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  return linear_common(x, weight, bias, bias, kEpiBiasRelu);
}
"""

_CUDA_SRC = f"#define KBV_SPLIT_TF32 {int(_TF32_PASSES == 3)}\n" + _CUDA_BODY

_CPP_SRC = r"""
torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""

_ext = load_inline(
    name="kbv_cuda_l2_gemm_bias_relu",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
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
