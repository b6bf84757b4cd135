// The figures of one traced block (MemoryTrace's result): memory peak and its sources, pools, VMM,
// local memory, kernels, and the block's activities. Plain data, no CUDA: produced by the pure
// reduction (gpu_trace_reduction.h) and read by the bindings (module.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "native/gpu_trace_peak.h"

namespace kbv::native {

// One GPU activity of a traced block, recorded when the trace is asked for them: a kernel (its
// name demangled), a copy or a fill, with CUPTI's stream id and timestamps. What kbv's kernel
// trace judges (T1, B1, B2: src/judge/kernel_trace.hpp), without torch.profiler, whose first use
// costs 4-6 s per process on the H200 (docs/results/issue4-suite-bench-h200.md).
struct ActivityRecord {
  std::string kind;  // "kernel", "copy", "fill"
  std::string name;
  std::uint32_t stream = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  // A kernel's launcher: ClassifyAllocationSource's label of the library that called the launch
  // API ("torch", "cublas", "cudnn", "triton", "ext:<file>.so", "ctypes", ...), "graph" for a
  // kernel replayed by a CUDA graph launch, "" when no launch callback was paired with it.
  std::string launcher;
};

struct MemoryTraceResult {
  PeakResult peak;
  // The same running peak over every source but "torch" (PyTorch's caching allocator): add it to
  // torch.cuda.max_memory_allocated's growth when the caching allocator is on (CUPTI then sees the
  // cache's segments, not tensors). An upper bound of the true joint peak.
  std::int64_t peak_excluding_torch_bytes = 0;
  // Activity records CUPTI delivered while the trace was active (every kind, before the filter on
  // time window and device), and records CUPTI reports as dropped (buffers full or not given).
  std::int64_t records = 0;
  std::int64_t dropped = 0;
  // Records cuptiActivityGetNextRecord could not parse (a corrupt buffer); must be 0.
  std::int64_t record_errors = 0;
  std::int64_t memory_records = 0;  // MEMORY2 records counted (this device, in the window)
  std::int64_t memory2_seen = 0;    // MEMORY2 records delivered (any device, kind, time)
  // Allocation and release calls (cudaMalloc*/cudaFree*, cuMemAlloc*/cuMemFree*, async variants)
  // seen by API callbacks in the window, and how many of them were counted: those MEMORY2 did not
  // report (by correlation id) on this device. The source of a callback allocation is the shared
  // object that called the API, read from the calling thread's stack.
  std::int64_t api_allocation_records = 0;
  std::int64_t api_allocations_counted = 0;
  // MEMORY2 allocations whose source was taken from the stack of the same call (the callback's)
  // because CUPTI named another library (or none).
  std::int64_t sources_from_stack = 0;
  // "memory2", "callback", "memory2+callback", or "none" (no allocation seen at all).
  std::string allocations_counted_via = "none";
  std::int64_t other_device_records = 0;  // MEMORY2 records of other devices (not counted)
  std::int64_t host_allocated_bytes = 0;  // pinned/pageable host allocations (not counted)
  // Device bytes libcupti itself allocated during the block (not counted in the peak).
  std::int64_t tracer_allocated_bytes = 0;
  // "library" when CUPTI named the allocating shared object for at least one record, else
  // "memory_kind" (by_source keys are then "kind:<memory kind>").
  std::string attribution = "memory_kind";
  // Per shared-object basename (only when attribution == "library"): bytes allocated.
  std::map<std::string, std::int64_t> by_library_allocated;

  // Asynchronous pools (cudaMallocAsync / cuMemAllocAsync): the largest pool size and utilised
  // size any record reported during the block, and MEMORY_POOL records (created/trimmed/destroyed).
  std::int64_t pool_records = 0;
  std::int64_t pool_peak_size_bytes = 0;
  std::int64_t pool_peak_utilized_bytes = 0;

  // VMM (cuMemCreate/cuMemRelease seen by driver callbacks): how many, and whether they were
  // counted from the callbacks ("callback"), already covered by MEMORY2 ("memory2"), or not seen
  // ("none"; also when callbacks were unavailable, see notes).
  std::int64_t vmm_events = 0;
  std::int64_t vmm_maps = 0;
  std::string vmm_counted_via = "none";

  // Local memory (per-thread stack) reservation. The context reserves stack_limit bytes for every
  // thread the device can hold (SMs x max threads per SM); a kernel that needs more makes the
  // driver grow it, and it stays grown. local_memory_bytes is that growth during the block:
  // (max(stack limit after, largest per-thread local memory of a kernel in the block) - stack
  // limit before) x thread capacity, or 0.
  std::int64_t local_memory_bytes = 0;
  // The reservation in effect at the end of the block above CUDA's default 1 KiB stack per thread:
  // (max(stack limit after, per-thread max) - 1024) x thread capacity. Unlike local_memory_bytes it
  // does not read 0 on a warm call whose reservation grew during warm-up.
  std::int64_t local_memory_above_default_bytes = 0;
  std::int64_t local_memory_reserved_bytes = 0;  // largest localMemoryTotal of a kernel record
  std::int64_t local_memory_per_thread_max = 0;  // largest localMemoryPerThread of a kernel record
  std::int64_t stack_limit_before = -1;          // bytes per thread; -1 when unknown
  std::int64_t stack_limit_after = -1;
  std::int64_t thread_capacity = 0;  // SMs x max resident threads per SM
  std::int64_t kernels = 0;          // kernel records in the block on this device
  // Launch API calls seen by the callbacks in the block (traces that record activities), and
  // the kernels of the block paired with one of them (their `launcher` is set).
  std::int64_t launch_records = 0;
  std::int64_t kernels_with_launcher = 0;
  // The span of those kernels on the device (CUPTI timestamps, 0 when none): the start of the
  // first and the end of the last, on any stream. Compared with a call's event time it shows
  // work the events did not cover (kernels left running on another stream).
  std::uint64_t kernel_first_start_ns = 0;
  std::uint64_t kernel_last_end_ns = 0;

  std::uint64_t start_ns = 0;  // CUPTI timestamps of __enter__ and __exit__
  std::uint64_t end_ns = 0;
  std::vector<std::string> notes;  // what was not available or looked wrong
  // This device's kernels, copies and fills in the block, by start time (only when the trace was
  // made with record_activities).
  std::vector<ActivityRecord> activities;
};

}  // namespace kbv::native
