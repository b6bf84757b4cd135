// The GPU tracer's collector: the process-wide CUPTI subscription (CUPTI allows one client), the
// activity buffers, and the API callbacks, which copy what CUPTI reports into the plain records of
// gpu_trace_records.h while a trace is active. Allocation and launch callbacks read the calling
// library from the thread's stack. Built only with CUDA and CUPTI's headers (KBV_NATIVE_CUPTI); the
// session (gpu_trace_session.cpp) drives it, the reduction never sees it.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "native/cupti_loader.h"
#include "native/gpu_trace_records.h"

namespace kbv::native {

// Process-wide: one collector, at most one active trace. Never destroyed (CUPTI's thread may call
// back during exit).
struct TraceCollector {
  // Set once by InitializeCollector (under init_mutex).
  std::mutex init_mutex;
  bool initialized = false;
  std::string init_error;  // non-empty: CUPTI cannot be used in this process
  std::vector<std::string> init_notes;
  CuptiApi api;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool callbacks_ok = false;  // API callbacks (VMM, allocation APIs) usable
  // cuCtxGetDevice of the libcuda the process already loaded (null: devices read as unknown).
  CUresult (*CtxGetDevice)(CUdevice*) = nullptr;
  // The library is new enough for the `source` field to be read (set once at initialisation).
  bool source_readable = false;

  // Guarded by mutex: what the callbacks collect while a trace is active.
  std::mutex mutex;
  bool active = false;
  CollectedTrace collected;
  // Set by a trace that records activities: kernel names are copied, copies and fills kept.
  std::atomic<bool> record_activities{false};
};

TraceCollector& Collector();

// Loads libcupti, subscribes (which detects another CUPTI client) and registers the buffer
// callbacks, once per process. Returns "" or why CUPTI cannot be used; the outcome is kept.
std::string InitializeCollector();

// Starts collecting for a new trace, dropping what a previous one left. False (and nothing
// changed) when a trace is already collecting.
bool StartCollecting();
// Stops collecting (records arriving later are discarded), keeping what was collected.
void StopCollecting();
// Stops collecting and hands over everything collected since StartCollecting.
CollectedTrace TakeCollected();

// Switches the trace's API callbacks (VMM, then the allocation APIs of driver and runtime) on,
// one after the other, stopping at the first failure; returns it or CUPTI_SUCCESS.
CUptiResult EnableTraceCallbacks();
// Switches every trace callback on (1) or off (0), all of them; the first failure or
// CUPTI_SUCCESS.
CUptiResult SetTraceCallbacks(uint32_t enable);
// Switches the kernel-launch callbacks (which library launched each kernel) on (1) or off (0),
// each of them; returns how many CUPTI accepted and appends the refused ones to `refused` (a
// refused launch API leaves its kernels to be attributed by name). Only traces that record
// activities use them: a launch callback reads the caller's stack, which the timing and memory
// traces should not pay.
int SetLaunchCallbacks(uint32_t enable, std::string* refused = nullptr);

}  // namespace kbv::native
