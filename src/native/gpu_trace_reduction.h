// The GPU tracer's reduction: the records collected during one traced block (gpu_trace_records.h)
// into its figures (MemoryTraceResult). Pure: no CUPTI, no CUDA, no global state, so it is
// unit-tested on any machine (tests/cpp/gpu_trace_reduction_test.cpp). The session
// (gpu_trace_session.cpp) calls it once, at the end of a trace, after the last flush.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "native/gpu_trace_records.h"
#include "native/gpu_trace_result.h"

namespace kbv::native {

// What the session knows of the traced block besides its records.
struct TraceBlock {
  int device = 0;              // the traced device: records of other devices are not counted
  std::uint64_t start_ns = 0;  // CUPTI timestamps of enter and exit: the window, both ends in
  std::uint64_t end_ns = 0;
  bool record_activities = false;  // keep the kernels, copies and fills themselves
  // The API callbacks were on for the whole block; when false, vmm_counted_via reads "none".
  bool callbacks_enabled = false;
  // The per-thread stack limit at enter and at exit (-1: unknown) and the device's resident-thread
  // capacity (0: unknown), for the local-memory figures.
  std::int64_t stack_limit_before = -1;
  std::int64_t stack_limit_after = -1;
  std::int64_t thread_capacity = 0;
  // Why the stack limit could not be read at exit ("" when it was).
  std::string stack_limit_after_error;
  // The session's notes so far (initialisation, enter, exit); the result's notes start with them.
  std::vector<std::string> notes;
};

// Filters the records to the block's device and window, pairs MEMORY2 records with the API
// callbacks of the same call (correlation id: a call either reports counts once), and computes
// the peak (over every source and without "torch"), pools, VMM, local memory, kernels and the
// activities. Allocations CUPTI itself made are reported apart (tracer_allocated_bytes).
MemoryTraceResult ReduceTrace(const TraceBlock& block, CollectedTrace collected);

}  // namespace kbv::native
