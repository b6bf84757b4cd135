// MemoryTrace on the CUPTI path: one trace's enter (claim the collector, switch the callbacks and
// activity kinds on, read the window's start) and exit (switch them off and flush, in the order
// CUPTI needs, read the device's stack limit, then reduce the records). The process-wide CUPTI
// state is the collector's (gpu_trace_collector.h); the figures come from ReduceTrace.
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "native/cupti_loader.h"
#include "native/gpu_trace.h"
#include "native/gpu_trace_collector.h"
#include "native/gpu_trace_reduction.h"

namespace kbv::native {
namespace {

std::string CudaErrorText(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

std::string ResultString(CUptiResult status) { return CuptiResultText(Collector().api, status); }

struct DeviceFacts {
  std::int64_t stack_limit = -1;
  std::int64_t thread_capacity = 0;
  std::string error;
};

// The per-thread stack limit (and the device's resident-thread capacity) of `device`, leaving the
// caller's current device as it was.
DeviceFacts ReadDeviceFacts(int device, bool with_capacity) {
  DeviceFacts facts;
  int previous = 0;
  cudaError_t status = cudaGetDevice(&previous);
  if (status != cudaSuccess) {
    facts.error = "cudaGetDevice: " + CudaErrorText(status);
    return facts;
  }
  if (previous != device && (status = cudaSetDevice(device)) != cudaSuccess) {
    facts.error = "cudaSetDevice: " + CudaErrorText(status);
    return facts;
  }
  size_t stack = 0;
  status = cudaDeviceGetLimit(&stack, cudaLimitStackSize);
  if (status == cudaSuccess) {
    facts.stack_limit = static_cast<std::int64_t>(stack);
  } else {
    facts.error = "cudaDeviceGetLimit(cudaLimitStackSize): " + CudaErrorText(status);
  }
  if (with_capacity) {
    int sms = 0;
    int threads = 0;
    cudaError_t a = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaError_t b =
        cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device);
    if (a == cudaSuccess && b == cudaSuccess) {
      facts.thread_capacity = std::int64_t{sms} * threads;
    } else {
      facts.error += (facts.error.empty() ? "" : "; ") + std::string("cudaDeviceGetAttribute: ") +
                     CudaErrorText(a != cudaSuccess ? a : b);
    }
  }
  if (previous != device) cudaSetDevice(previous);
  return facts;
}

}  // namespace

CuptiStatus InitializeCupti() {
  CuptiStatus out;
  out.error = InitializeCollector();
  TraceCollector& state = Collector();
  std::lock_guard<std::mutex> lock(state.init_mutex);
  out.library = state.api.path;
  out.version = state.api.version;
  out.allocation_source = state.source_readable;
  out.callbacks = state.callbacks_ok;
  out.notes = state.init_notes;
  return out;
}

MemoryTrace::MemoryTrace(int device, bool record_activities)
    : device_(device), record_activities_(record_activities) {}

MemoryTrace::~MemoryTrace() {
  if (active_) {
    try {
      Exit();
    } catch (...) {
    }
  }
}

std::string MemoryTrace::CuptiLibrary() {
  TraceCollector& state = Collector();
  std::lock_guard<std::mutex> lock(state.init_mutex);
  return state.api.path;
}

bool MemoryTrace::valid() const {
  return available_ && completed_ && result_.dropped == 0 && result_.record_errors == 0 &&
         result_.peak.duplicate_allocs == 0;
}

void MemoryTrace::Enter() {
  if (entered_) throw std::runtime_error("kbv_native: a MemoryTrace can be entered only once");
  entered_ = true;
  available_ = false;

  int count = 0;
  const cudaError_t count_status = cudaGetDeviceCount(&count);
  if (count_status != cudaSuccess) {
    why_unavailable_ = "no usable CUDA device: cudaGetDeviceCount: " + CudaErrorText(count_status);
    return;
  }
  if (device_ < 0 || device_ >= count) {
    why_unavailable_ = "device " + std::to_string(device_) + " does not exist (" +
                       std::to_string(count) + " visible)";
    return;
  }

  const std::string init_error = InitializeCollector();
  if (!init_error.empty()) {
    why_unavailable_ = init_error;
    return;
  }
  TraceCollector& state = Collector();
  CuptiApi& api = state.api;
  {
    std::lock_guard<std::mutex> lock(state.init_mutex);
    result_.notes = state.init_notes;
  }
  const DeviceFacts facts = ReadDeviceFacts(device_, true);
  result_.stack_limit_before = facts.stack_limit;
  result_.thread_capacity = facts.thread_capacity;
  if (!facts.error.empty()) {
    result_.notes.push_back("local memory: " + facts.error);
  }

  // Claim the collector, clear what a previous trace left, and start collecting before enabling
  // anything, so no record of this block can arrive while collection is off.
  if (!StartCollecting()) {
    why_unavailable_ = "another MemoryTrace is active";
    throw std::runtime_error(
        "kbv_native: another MemoryTrace is already active (nested or "
        "concurrent traces are not supported)");
  }

  CUptiResult status = CUPTI_SUCCESS;
  bool callbacks_on = false;
  if (state.callbacks_ok) {
    callbacks_on = true;
    status = EnableTraceCallbacks();
    if (status != CUPTI_SUCCESS) {
      result_.notes.push_back(
          "API callbacks unavailable (cuptiEnableCallback: " + ResultString(status) +
          "): allocations counted from MEMORY2 records alone");
      callbacks_on = false;
    }
    if (!callbacks_on) SetTraceCallbacks(0);
  }

  status = api.Enable(CUPTI_ACTIVITY_KIND_MEMORY2);
  if (status != CUPTI_SUCCESS) {
    if (callbacks_on) SetTraceCallbacks(0);
    StopCollecting();
    why_unavailable_ = "cuptiActivityEnable(MEMORY2) failed: " + ResultString(status);
    return;
  }
  if (state.source_readable) {
    status = api.EnableAllocationSource(1);
    source_enabled_ = status == CUPTI_SUCCESS;
    if (!source_enabled_) {
      result_.notes.push_back("cuptiActivityEnableAllocationSource failed (" +
                              ResultString(status) + "): by_source groups by memory kind");
    }
  }
  status = api.Enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
  pool_enabled_ = status == CUPTI_SUCCESS;
  if (!pool_enabled_) {
    result_.notes.push_back("MEMORY_POOL records unavailable: " + ResultString(status));
  }
  // CONCURRENT_KERNEL, not KERNEL: KERNEL serialises kernels.
  status = api.Enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel_enabled_ = status == CUPTI_SUCCESS;
  if (!kernel_enabled_) {
    result_.notes.push_back("kernel records unavailable (" + ResultString(status) +
                            "): local memory from the stack limit alone");
  }
  if (record_activities_) {
    state.record_activities = true;
    // Which library launched each kernel (kernel_trace's attribution: the candidate's own code,
    // PyTorch, a vendor library). Without them kernels are told apart by name alone.
    if (callbacks_on) {
      std::string refused;
      launch_callbacks_ = SetLaunchCallbacks(1, &refused) > 0;
      if (!refused.empty()) {
        result_.notes.push_back("kernel-launch callbacks refused: " + refused +
                                (launch_callbacks_ ? ": kernels launched through those APIs are "
                                                     "attributed by name"
                                                   : ": kernels are attributed by name alone"));
      }
    }
    const CUptiResult copies = api.Enable(CUPTI_ACTIVITY_KIND_MEMCPY);
    const CUptiResult fills = api.Enable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (copies != CUPTI_SUCCESS || fills != CUPTI_SUCCESS) {
      result_.notes.push_back("copy and fill records unavailable (" +
                              ResultString(copies != CUPTI_SUCCESS ? copies : fills) + ")");
    }
  }
  callbacks_enabled_ = callbacks_on;

  std::uint64_t now = 0;
  status = api.GetTimestamp(&now);
  if (status != CUPTI_SUCCESS) {
    result_.notes.push_back("cuptiGetTimestamp failed at enter: " + ResultString(status));
    now = 0;  // no lower bound: every record collected counts
  }
  result_.start_ns = now;
  available_ = true;
  active_ = true;
  why_unavailable_.clear();
}

void MemoryTrace::Exit() {
  if (!active_) return;
  active_ = false;
  CuptiApi& api = Collector().api;
  // The notes and the enter figures so far; ReduceTrace makes the rest from the records.
  MemoryTraceResult& out = result_;
  std::int64_t exit_record_errors = 0;  // CUPTI calls of the exit that failed

  std::uint64_t end = 0;
  CUptiResult status = api.GetTimestamp(&end);
  if (status != CUPTI_SUCCESS) {
    out.notes.push_back("cuptiGetTimestamp failed at exit: " + ResultString(status));
    end = std::numeric_limits<std::uint64_t>::max();
  }
  out.end_ns = end;

  if (callbacks_enabled_) {
    status = SetTraceCallbacks(0);
    if (status != CUPTI_SUCCESS) {
      out.notes.push_back("cuptiEnableCallback(0) failed: " + ResultString(status));
    }
  }
  if (launch_callbacks_) {
    std::string refused;
    SetLaunchCallbacks(0, &refused);
    if (!refused.empty()) {
      out.notes.push_back("cuptiEnableCallback(0) failed for launch callbacks: " + refused);
    }
  }
  // Deliver everything recorded, stop recording, deliver what arrived meanwhile (its timestamps
  // are past `end`, so it is filtered out below; flushing it now keeps it out of the next trace).
  status = api.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (status != CUPTI_SUCCESS) {
    out.notes.push_back("cuptiActivityFlushAll failed: " + ResultString(status));
    ++exit_record_errors;
  }
  auto disable = [&](CUpti_ActivityKind kind, const char* name) {
    const CUptiResult s = api.Disable(kind);
    if (s != CUPTI_SUCCESS) {
      out.notes.push_back(std::string("cuptiActivityDisable(") + name +
                          ") failed: " + ResultString(s));
    }
  };
  disable(CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2");
  if (source_enabled_) {
    status = api.EnableAllocationSource(0);
    if (status != CUPTI_SUCCESS) {
      out.notes.push_back("cuptiActivityEnableAllocationSource(0) failed: " + ResultString(status));
    }
  }
  if (pool_enabled_) disable(CUPTI_ACTIVITY_KIND_MEMORY_POOL, "MEMORY_POOL");
  if (kernel_enabled_) disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL");
  if (record_activities_) {
    disable(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY");
    disable(CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET");
  }
  status = api.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (status != CUPTI_SUCCESS) {
    out.notes.push_back("cuptiActivityFlushAll (second) failed: " + ResultString(status));
  }
  size_t global_dropped = 0;
  status = api.GetNumDroppedRecords(nullptr, 0, &global_dropped);
  if (status != CUPTI_SUCCESS) {
    out.notes.push_back("cuptiActivityGetNumDroppedRecords failed: " + ResultString(status));
    ++exit_record_errors;
  }

  CollectedTrace collected = TakeCollected();
  collected.dropped += static_cast<std::int64_t>(global_dropped);
  collected.record_errors += exit_record_errors;

  TraceBlock block;
  block.device = device_;
  block.start_ns = out.start_ns;
  block.end_ns = end;
  block.record_activities = record_activities_;
  block.callbacks_enabled = callbacks_enabled_;
  block.stack_limit_before = out.stack_limit_before;
  block.thread_capacity = out.thread_capacity;
  const DeviceFacts after = ReadDeviceFacts(device_, false);
  block.stack_limit_after = after.stack_limit;
  block.stack_limit_after_error = after.error;
  block.notes = std::move(out.notes);
  result_ = ReduceTrace(block, std::move(collected));
  completed_ = true;
}

}  // namespace kbv::native
