// Judging the GPU kernel trace of one forward (threats T1, B1, B2 on the GPU). The candidate's
// worker records the GPU activities (kernels, copies, fills) of one forward between two marker
// kernels on the current stream (python/kbv/gpu_guards.py); the static scan lists the
// candidate's own __global__ kernels. The judgement is made here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace kbv::judge {

// Work on another stream that ends this long after the current stream's end-of-call marker is
// ignored (timestamps of two streams, a marker of ~1 us).
inline constexpr double kEscapeSlackUs = 5.0;
// ... and work that escapes by less than this fraction of the forward's whole GPU span.
inline constexpr double kEscapeFraction = 0.05;

// What the static scan says the candidate defines: the `__global__` kernels of the C++/CUDA
// sources it builds, and the Triton kernels of its Python source (`@triton.jit` functions).
struct OwnKernels {
  std::vector<std::string> cuda;
  std::vector<std::string> triton;
};

// Who a kernel belongs to:
//   "own"       one of the candidate's __global__ kernels (its name contains one of their names
//               as a whole identifier), launched by the candidate's code or by an unknown caller;
//   "candidate" another kernel of the candidate's own code: launched by its extension, by Triton's
//               launcher (its JIT-compiled kernels), through ctypes, or named like one of its
//               Triton kernels;
//   "aten"      PyTorch's own kernels (launched by libtorch, or named at::/c10::/pytorch), the
//               kernels torch.compile generates and PyTorch launches included;
//   "library"   cuBLAS/cuBLASLt/CUTLASS/cuDNN/cuFFT/... (by launcher, else by name);
//   "copy"/"fill" (memcpy/memset), or "other" (no launcher known and a name that says nothing).
// `launcher`: the label of the library that called the launch API (kbv_native's kernel trace,
// gpu_trace_records.h: "torch", "cublas", "triton", "ext:<file>.so", "ctypes", "graph", ...; ""
// when unknown, as under torch.profiler). A known launcher decides before the name does; a
// graph launch (the kernels were captured earlier) and an unknown one leave it to the name.
std::string kernel_origin(const std::string& name, const std::string& kind, const OwnKernels& own,
                          const std::string& launcher = "");
std::string kernel_origin(const std::string& name, const std::string& kind,
                          const std::vector<std::string>& own_kernels);

struct KernelTraceAssessment {
  bool available = false;
  bool own_kernels_ran = false;  // one of the candidate's __global__ kernels ran
  // The kernels of the forward (copies and fills apart), and those of the candidate's own code
  // ("own" and "candidate"). With no kernel at all the trace says nothing about no_custom_kernel.
  int kernels = 0;
  int candidate_kernels = 0;
  // The trace decides no_custom_kernel (flagged or cleared): it saw kernels, and all of them or
  // one of the candidate's. Otherwise the dispatcher's evidence stands.
  bool decides_custom_code = false;
  nlohmann::json record;    // what goes into result.candidate.trace.gpu
  std::vector<Flag> flags;  // timing_escapes_events, library_main_op, kernel_never_called
                            // (reject); side_stream_work (info)
};

// `gpu`: {"available", "current_stream", "call_end_us", "activity_count", "activities": [{name,
// stream, start_us, end_us, kind, launcher?}] (the first 256), "kernels_seen": [{name, launcher?,
// count, us}] (every kernel, grouped), "kernels_seen_truncated"} as gpu_guards.kernel_trace
// returns it. `own`: the kernels the static
// scan found. `reference_heavy`: the reference does a matmul/conv/softmax/... (its heavy
// operator classes, from the dispatcher trace). `extension_calls`: completed calls of the
// candidate's extension functions in the traced forward.
//
// timing_escapes_events: work on a stream other than the current one ends more than
//   max(kEscapeSlackUs, kEscapeFraction x span) after the current stream's end-of-call marker.
// kernel_never_called: the source defines __global__ kernels, the forward called the extension,
//   and none of those kernels ran (a ghost kernel; the host code did the work otherwise).
// library_main_op: the reference has a heavy operator, library GEMM/convolution kernels ran and
//   no kernel of the candidate's own code did (cuBLAS/cuDNN called directly from C++).
// no_custom_kernel: the forward launched GPU kernels and every one of them is PyTorch's or a
//   library's ("aten"/"library"): none is the candidate's own and none is unattributed ("other"
//   never counts against it). No kernel at all, or a list of kernels known to be incomplete,
//   decides nothing (the dispatcher trace does).
KernelTraceAssessment assess_kernel_trace(const nlohmann::json& gpu, const OwnKernels& own,
                                          bool reference_heavy, int extension_calls);
KernelTraceAssessment assess_kernel_trace(const nlohmann::json& gpu,
                                          const std::vector<std::string>& own_kernels,
                                          bool reference_heavy, int extension_calls);

}  // namespace kbv::judge
