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

// "own" (a kernel whose name contains one of the candidate's __global__ names as a whole
// identifier), "library" (cuBLAS, cuBLASLt, CUTLASS, cuDNN, GEMM/convolution kernels),
// "aten" (PyTorch's own kernels), "copy"/"fill" (memcpy/memset), or "other".
std::string kernel_origin(const std::string& name, const std::string& kind,
                          const std::vector<std::string>& own_kernels);

struct KernelTraceAssessment {
  bool available = false;
  bool own_kernels_ran = false;
  nlohmann::json record;    // what goes into result.candidate.trace.gpu
  std::vector<Flag> flags;  // timing_escapes_events, library_main_op, kernel_never_called
                            // (reject); side_stream_work (info)
};

// `gpu`: {"available", "current_stream", "call_end_us", "activities": [{name, stream, start_us,
// end_us, kind}]} as gpu_guards.kernel_trace returns it. `own_kernels`: the __global__ names the
// static scan found. `reference_heavy`: the reference does a matmul/conv/softmax/... (its heavy
// operator classes, from the dispatcher trace). `extension_calls`: completed calls of the
// candidate's extension functions in the traced forward.
//
// timing_escapes_events: work on a stream other than the current one ends more than
//   max(kEscapeSlackUs, kEscapeFraction x span) after the current stream's end-of-call marker.
// kernel_never_called: the source defines __global__ kernels, the forward called the extension,
//   and none of those kernels ran (a ghost kernel; the host code did the work otherwise).
// library_main_op: the reference has a heavy operator, library GEMM/convolution kernels ran and
//   none of the candidate's own kernels did (cuBLAS/cuDNN called directly from C++).
KernelTraceAssessment assess_kernel_trace(const nlohmann::json& gpu,
                                          const std::vector<std::string>& own_kernels,
                                          bool reference_heavy, int extension_calls);

}  // namespace kbv::judge
