"""C = A @ B (square 4096 x 4096 float32) on tensor cores with 3xTF32 split precision: a 128x128x32
block tile in a 3-stage cp.async shared-memory pipeline, 8 warps of 64x32, mma.sync m16n8k8 TF32
with FP32 accumulation. Each operand element is split into hi = tf32(x) and lo = tf32(x - hi)
and the product accumulated as lo*hi + hi*lo + hi*hi, which recovers close to FP32 accuracy
(the dropped lo*lo term is ~2^-22 relative). Shapes that are not multiples of the tile take a
plain FP32 SIMT tiled kernel instead.

Correct on every input family: operand rounding error is ~2^-22 relative per product (vs ~2^-11
for single TF32, the baseline's own precision), accumulation is FP32 over 4096 terms in the
tensor core, so the error is at FP32-GEMM level, far inside 4x the TF32 baseline's error, for
mixed-sign, offset and 1e6-sized operands alike (no overflow: products stay far below 3e38).
"""

# kbv-kernelbench: 423217d
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# True: 3xTF32 (close to FP32 accuracy, 3 tensor-core products per step). False: one TF32
# product (the baseline's own precision, ~3x faster).
_SPLIT_TF32 = True

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int kThreads = 256;  // 8 warps: 2 (M) x 4 (N), each 64 x 32
constexpr int kStages = 3;
constexpr int LDA = BK + 4;  // 36: A fragment reads hit 32 distinct banks
constexpr int LDB = BN + 8;  // 136: B fragment reads hit 32 distinct banks
constexpr int A_STAGE = BM * LDA;
constexpr int B_STAGE = BK * LDB;
constexpr int kSmemBytes = kStages * (A_STAGE + B_STAGE) * (int)sizeof(float);

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ uint32_t to_tf32(float f) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(f));
  return r;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Stage one BM x BK tile of A and one BK x BN tile of B (16-byte cp.async, 4 + 4 per thread).
__device__ __forceinline__ void load_tiles(const float* __restrict__ A, const float* __restrict__ B,
                                           float* as, float* bs, int64_t m0, int64_t n0,
                                           int64_t k0, int64_t K, int64_t N, int tid) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = tid + i * kThreads;
    const int r = idx >> 3, c4 = idx & 7;  // 128 rows x 8 float4
    cp_async16(smem_addr(as + r * LDA + c4 * 4), A + (m0 + r) * K + k0 + c4 * 4);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = tid + i * kThreads;
    const int r = idx >> 5, c4 = idx & 31;  // 32 rows x 32 float4
    cp_async16(smem_addr(bs + r * LDB + c4 * 4), B + (k0 + r) * N + n0 + c4 * 4);
  }
}

// Requires M % 128 == 0, N % 128 == 0, K % 32 == 0, K > 0, 16-byte aligned row-major A, B, C.
template <bool SPLIT>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_tf32_kernel(const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  extern __shared__ __align__(16) float smem[];
  float* As = smem;
  float* Bs = smem + kStages * A_STAGE;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;
  const int g = lane >> 2, t = lane & 3;
  const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
  const int KT = (int)(K / BK);

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < KT)
      load_tiles(A, B, As + s * A_STAGE, Bs + s * B_STAGE, m0, n0, (int64_t)s * BK, K, N, tid);
    cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies)
    __syncthreads();               // ... everyone's; and stage (kt - 1) % kStages is free
    {
      const int nk = kt + kStages - 1;
      const int st = nk % kStages;
      if (nk < KT)
        load_tiles(A, B, As + st * A_STAGE, Bs + st * B_STAGE, m0, n0, (int64_t)nk * BK, K, N,
                   tid);
      cp_async_commit();
    }
    const float* as = As + (kt % kStages) * A_STAGE + (wm * 64 + g) * LDA + t;
    const float* bs = Bs + (kt % kStages) * B_STAGE + t * LDB + wn * 32 + g;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      uint32_t ahi[4][4], alo[4][4], bhi[4][2], blo[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const float* ap = as + mi * 16 * LDA + kk;
        const float v[4] = {ap[0], ap[8 * LDA], ap[4], ap[8 * LDA + 4]};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          ahi[mi][e] = to_tf32(v[e]);
          alo[mi][e] = SPLIT ? to_tf32(v[e] - __uint_as_float(ahi[mi][e])) : 0u;
        }
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const float* bp = bs + kk * LDB + ni * 8;
        const float v[2] = {bp[0], bp[4 * LDB]};
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          bhi[ni][e] = to_tf32(v[e]);
          blo[ni][e] = SPLIT ? to_tf32(v[e] - __uint_as_float(bhi[ni][e])) : 0u;
        }
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          if (SPLIT) {  // small terms first
            mma_tf32(acc[mi][ni], alo[mi], bhi[ni]);
            mma_tf32(acc[mi][ni], ahi[mi], blo[ni]);
          }
          mma_tf32(acc[mi][ni], ahi[mi], bhi[ni]);
        }
    }
  }
  cp_async_wait<0>();  // nothing left in flight at exit (the trailing groups are empty)

  // Accumulator layout of m16n8: c0, c1 at (g, 2t), (g, 2t + 1); c2, c3 at (g + 8, ...).
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int64_t row = m0 + wm * 64 + mi * 16 + g;
      const int64_t col = n0 + wn * 32 + ni * 8 + 2 * t;
      *reinterpret_cast<float2*>(C + row * N + col) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2*>(C + (row + 8) * N + col) =
          make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
}

// Any shape: 16 x 16 shared-memory tiles, FP32 FMA.
__global__ void __launch_bounds__(256)
    gemm_simt_kernel(const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  __shared__ float as[16][17], bs[16][17];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = (int64_t)blockIdx.y * 16 + ty, col = (int64_t)blockIdx.x * 16 + tx;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    as[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.f;
    bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B, bool split) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda(), "A and B must be CUDA tensors");
  TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
              "A and B must be float32");
  TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "bad matmul shapes");
  const c10::cuda::CUDAGuard guard(A.device());
  auto Ac = A.contiguous();
  auto Bc = B.contiguous();
  const int64_t M = Ac.size(0), K = Ac.size(1), N = Bc.size(1);
  auto C = torch::empty({M, N}, Ac.options());
  if (M == 0 || N == 0) return C;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* ap = Ac.data_ptr<float>();
  const float* bp = Bc.data_ptr<float>();
  float* cp = C.data_ptr<float>();
  const bool fast = M % BM == 0 && N % BN == 0 && K % BK == 0 && K > 0 && M / BM <= 65535 &&
                    aligned16(ap) && aligned16(bp) && aligned16(cp);
  if (fast) {
    const dim3 grid((unsigned)(N / BN), (unsigned)(M / BM));
    if (split) {
      TORCH_CHECK(cudaFuncSetAttribute(gemm_tf32_kernel<true>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kSmemBytes) == cudaSuccess,
                  "cannot enable ", kSmemBytes, " bytes of shared memory");
      gemm_tf32_kernel<true><<<grid, kThreads, kSmemBytes, stream>>>(ap, bp, cp, M, N, K);
    } else {
      TORCH_CHECK(cudaFuncSetAttribute(gemm_tf32_kernel<false>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kSmemBytes) == cudaSuccess,
                  "cannot enable ", kSmemBytes, " bytes of shared memory");
      gemm_tf32_kernel<false><<<grid, kThreads, kSmemBytes, stream>>>(ap, bp, cp, M, N, K);
    }
  } else {
    const dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    TORCH_CHECK((M + 15) / 16 <= 65535, "M too large for the fallback kernel");
    gemm_simt_kernel<<<grid, dim3(16, 16), 0, stream>>>(ap, bp, cp, M, N, K);
  }
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "matmul kernel launch failed: ", cudaGetErrorString(err));
  return C;
}
"""

_CPP_SRC = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B, bool split);"

_ext = load_inline(
    name="kbv_kb_l1_1_matmul_3xtf32",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.matmul_forward(A, B, _SPLIT_TF32)
