// What the GPU tracer collects during one traced block, as plain structs: the collector
// (gpu_trace_collector.cpp) copies CUPTI's activity records and the API callbacks' parameters into
// them, and the reduction (gpu_trace_reduction.cpp) turns them into a MemoryTraceResult. No CUPTI
// type appears here, so the reduction compiles and is unit-tested without CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbv::native {

// CUpti_ActivityMemoryOperationType, reduced to what the reduction tells apart.
enum class MemoryOp : std::uint8_t { kAllocation, kRelease, kOther };

// CUpti_ActivityMemoryKind; kOther for a kind this build does not know.
enum class MemoryKind : std::uint8_t {
  kUnknown,
  kPageable,
  kPinned,
  kDevice,
  kArray,
  kManaged,
  kDeviceStatic,
  kManagedStatic,
  kOther,
};

// A MEMORY2 activity record (CUpti_ActivityMemory4).
struct MemoryRecord {
  std::uint64_t timestamp = 0;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  // A local (cudaMallocAsync) pool's size and utilised size; 0 for other allocations.
  std::uint64_t pool_size = 0;
  std::uint64_t pool_utilized = 0;
  std::uint32_t correlation = 0;
  std::uint32_t device = 0;
  MemoryOp op = MemoryOp::kOther;
  MemoryKind kind = MemoryKind::kUnknown;
  std::string source;  // the allocating shared object CUPTI named ("" when none or not read)
};

// A MEMORY_POOL activity record (CUpti_ActivityMemoryPool3); size and utilized of local pools.
struct PoolRecord {
  std::uint64_t timestamp = 0;
  std::uint64_t size = 0;
  std::uint64_t utilized = 0;
  std::uint32_t device = 0;
};

// A kernel activity record (CUpti_ActivityKernel10).
struct KernelRecord {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t local_total = 0;
  std::uint32_t local_per_thread = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  // The launching API call's correlation id: pairs the kernel with its LaunchRecord.
  std::uint32_t correlation = 0;
  std::string name;  // mangled; kept only while a trace records activities
};

// A kernel launch seen by an API callback (cudaLaunchKernel*, cuLaunchKernel*, the cooperative
// and graph launches), with the shared object that called the API: who launched the kernel of
// the same correlation id (the candidate's extension, Triton's launcher, libtorch, cuBLAS...).
// Collected only while a trace records activities.
struct LaunchRecord {
  std::uint32_t correlation = 0;
  bool graph = false;  // cudaGraphLaunch/cuGraphLaunch: the caller replays, it did not build
  std::string source;  // the calling library's path ("" when the stack could not be read)
};

// A copy or a fill, kept only while a trace records activities.
struct TransferRecord {
  bool fill = false;
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
};

// A VMM driver call seen by an API callback (cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap).
struct VmmRecord {
  enum class Op { kCreate, kRelease, kMap, kUnmap };
  Op op = Op::kCreate;
  std::uint64_t timestamp = 0;
  std::uint64_t handle = 0;
  std::uint64_t bytes = 0;
  std::uint32_t correlation = 0;
  int device = -1;
};

// A device allocation or release seen by an API callback (cudaMalloc*, cuMemAlloc*, the async
// variants, and their frees), with the shared object that called the API.
struct ApiAllocRecord {
  bool alloc = true;
  std::uint64_t timestamp = 0;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::uint32_t correlation = 0;
  int device = -1;  // -1: unknown (counted for the traced device)
  std::string source;
};

// Everything collected while one trace was active, of every device and time: the reduction
// filters by device and window.
struct CollectedTrace {
  std::vector<MemoryRecord> memory;
  std::vector<PoolRecord> pools;
  std::vector<KernelRecord> kernels;
  std::vector<TransferRecord> transfers;
  std::vector<VmmRecord> vmm;
  std::vector<ApiAllocRecord> api_allocs;
  std::vector<LaunchRecord> launches;
  std::int64_t records = 0;        // activity records delivered (every kind)
  std::int64_t memory2_seen = 0;   // MEMORY2 records delivered (any device, kind or time)
  std::int64_t dropped = 0;        // records CUPTI reported as dropped
  std::int64_t record_errors = 0;  // unparsable buffers and failed CUPTI queries
};

}  // namespace kbv::native
