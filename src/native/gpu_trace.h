// MemoryTrace: every device allocation and release during one forward call, from CUPTI's activity
// records (MEMORY2: cudaMalloc/cuMemAlloc, the async pools, library allocations; MEMORY_POOL: pool
// creation and trimming; CONCURRENT_KERNEL: local-memory reservations) plus API callbacks for the
// allocation calls of the runtime and the driver (cudaMalloc*, cuMemAlloc*, their async variants
// and frees) and VMM physical allocations (cuMemCreate/cuMemRelease), each counted where MEMORY2
// did not report the same call. On the H200 (driver 580.159, CUPTI 13.0) no MEMORY2 record was
// counted in a forward call (the cause is not known), so there the callbacks are the tracer.
//
// libcupti is loaded with dlopen at the first __enter__ (the copy torch already loaded when there
// is one), so a machine without it gets `available == false` and a reason, never an import error.
// This header needs no CUDA: a build without CUDA compiles it and the constructor throws.
//
// The pieces (docs/architecture.md, "Native tracer layout"): cupti_loader (dlopen, entry points),
// gpu_trace_collector (subscription, buffers, callbacks: CUPTI records into gpu_trace_records.h),
// gpu_trace_session.cpp (this class on the CUPTI path: enable, flush, disable), and the pure
// gpu_trace_reduction (records into gpu_trace_result.h's MemoryTraceResult).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "native/gpu_trace_result.h"

namespace kbv::native {

class MemoryTrace {
 public:
  // Throws std::runtime_error in a build without CUDA.
  // record_activities: also keep every kernel, copy and fill of the block (result().activities).
  explicit MemoryTrace(int device, bool record_activities = false);
  MemoryTrace(const MemoryTrace&) = delete;
  MemoryTrace& operator=(const MemoryTrace&) = delete;
  ~MemoryTrace();

  // Starts the trace. Never throws for a missing or refused CUPTI, a missing GPU or device: the
  // trace is then unavailable (available() false, why_unavailable() says why). Throws
  // std::runtime_error only for misuse: entering twice, or while another MemoryTrace is active.
  void Enter();
  // Ends the trace: flushes CUPTI's buffers and computes the figures. Touches no Python object (the
  // caller may release the GIL). The caller synchronises the device before this.
  void Exit();

  int device() const { return device_; }
  bool available() const { return available_; }
  const std::string& why_unavailable() const { return why_unavailable_; }
  // True after Exit() of an available trace.
  bool completed() const { return completed_; }
  // completed, nothing dropped, no corrupt record, no duplicate allocation.
  bool valid() const;
  const MemoryTraceResult& result() const { return result_; }
  // The libcupti that was loaded (empty before the first Enter or when none was).
  static std::string CuptiLibrary();

 private:
  int device_ = 0;
  bool entered_ = false;
  bool active_ = false;  // this object owns the process-wide tracer state
  bool available_ = false;
  bool completed_ = false;
  bool pool_enabled_ = false;       // MEMORY_POOL activity enabled by this trace
  bool kernel_enabled_ = false;     // CONCURRENT_KERNEL activity enabled by this trace
  bool record_activities_ = false;  // keep the activities themselves (result().activities)
  bool callbacks_enabled_ = false;  // VMM driver callbacks enabled by this trace
  bool launch_callbacks_ = false;   // kernel-launch callbacks enabled (record_activities only)
  bool source_enabled_ = false;     // allocation-source tracking switched on by this trace
  std::string why_unavailable_ = "the trace has not been entered";
  MemoryTraceResult result_;
};

// Loads and initialises CUPTI for this process if not done yet (what the first Enter does), and
// says how that went: "" or why CUPTI is unusable. A diagnostic; Enter calls it itself.
struct CuptiStatus {
  std::string error;
  std::string library;
  std::uint32_t version = 0;
  bool allocation_source = false;
  bool callbacks = false;
  std::vector<std::string> notes;
};
CuptiStatus InitializeCupti();

}  // namespace kbv::native
