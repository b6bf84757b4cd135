#include "native/gpu_trace_collector.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string_view>
#include <utility>

#include "native/allocation_source.h"

// cupti.h also brings generated_cuda_meta.h and generated_cuda_runtime_api_meta.h (the
// cuMemCreate_params, cudaMalloc_v3020_params, ... the callbacks read).

namespace kbv::native {

TraceCollector& Collector() {
  static TraceCollector* const collector = new TraceCollector();
  return *collector;
}

namespace {

// Activity buffers: 8 MiB each, 8-byte aligned (CUPTI's requirement). A forward call makes a few
// thousand records at most; CUPTI asks for more buffers when one fills.
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;
constexpr std::size_t kBufferAlign = 8;

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

MemoryOp ToMemoryOp(CUpti_ActivityMemoryOperationType op) {
  switch (op) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION:
      return MemoryOp::kAllocation;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE:
      return MemoryOp::kRelease;
    default:
      return MemoryOp::kOther;
  }
}

MemoryKind ToMemoryKind(CUpti_ActivityMemoryKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN:
      return MemoryKind::kUnknown;
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return MemoryKind::kPageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return MemoryKind::kPinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return MemoryKind::kDevice;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return MemoryKind::kArray;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return MemoryKind::kManaged;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return MemoryKind::kDeviceStatic;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return MemoryKind::kManagedStatic;
    default:
      return MemoryKind::kOther;
  }
}

// ---- buffer and driver callbacks (CUPTI's threads or the flushing thread; no Python) ----------

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  void* memory = std::aligned_alloc(kBufferAlign, kBufferBytes);
  *buffer = static_cast<uint8_t*>(memory);
  // A null buffer of size 0 makes CUPTI drop the records, and they are counted as dropped.
  *size = memory != nullptr ? kBufferBytes : 0;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                              size_t /*size*/, size_t valid_size) {
  TraceCollector& state = Collector();
  std::vector<MemoryRecord> memory;
  std::vector<PoolRecord> pools;
  std::vector<KernelRecord> kernels;
  std::vector<TransferRecord> transfers;
  const bool keep_activities = state.record_activities.load();
  std::int64_t records = 0;
  std::int64_t errors = 0;
  std::int64_t memory2_seen = 0;

  if (buffer != nullptr && valid_size > 0) {
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CUptiResult status = state.api.GetNextRecord(buffer, valid_size, &record);
      if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the buffer
      if (status != CUPTI_SUCCESS || record == nullptr) {
        ++errors;
        break;
      }
      ++records;
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_MEMORY2: {
          const auto* r = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
          MemoryRecord m;
          m.timestamp = r->timestamp;
          m.address = r->address;
          m.bytes = r->bytes;
          m.correlation = r->correlationId;
          m.device = r->deviceId;
          m.op = ToMemoryOp(r->memoryOperationType);
          m.kind = ToMemoryKind(r->memoryKind);
          if (r->memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
            m.pool_size = r->memoryPoolConfig.pool.size;
            m.pool_utilized = r->memoryPoolConfig.utilizedSize;
          }
          if (state.source_readable && r->source != nullptr) m.source = r->source;
          ++memory2_seen;
          memory.push_back(std::move(m));
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
          const auto* r = reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record);
          PoolRecord p;
          p.timestamp = r->timestamp;
          p.device = r->deviceId;
          if (r->memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
            p.size = r->size;
            p.utilized = r->utilizedSize;
          }
          pools.push_back(p);
          break;
        }
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* r = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          KernelRecord k;
          k.start = r->start;
          k.end = r->end;
          k.device = r->deviceId;
          k.local_per_thread = r->localMemoryPerThread;
          k.local_total = r->localMemoryTotal_v2 != 0 ? r->localMemoryTotal_v2
                                                      : std::uint64_t{r->localMemoryTotal};
          k.stream = r->streamId;
          k.correlation = r->correlationId;
          if (keep_activities && r->name != nullptr) k.name = r->name;
          kernels.push_back(std::move(k));
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* r = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          if (keep_activities)
            transfers.push_back({false, r->start, r->end, r->deviceId, r->streamId});
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* r = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          if (keep_activities)
            transfers.push_back({true, r->start, r->end, r->deviceId, r->streamId});
          break;
        }
        default:
          break;
      }
    }
  }

  size_t dropped = 0;
  if (state.api.GetNumDroppedRecords(context, stream_id, &dropped) != CUPTI_SUCCESS) ++errors;
  std::free(buffer);

  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.active) return;  // records outside a trace are discarded
  CollectedTrace& collected = state.collected;
  collected.records += records;
  collected.memory2_seen += memory2_seen;
  collected.record_errors += errors;
  collected.dropped += static_cast<std::int64_t>(dropped);
  std::move(memory.begin(), memory.end(), std::back_inserter(collected.memory));
  collected.pools.insert(collected.pools.end(), pools.begin(), pools.end());
  std::move(kernels.begin(), kernels.end(), std::back_inserter(collected.kernels));
  collected.transfers.insert(collected.transfers.end(), transfers.begin(), transfers.end());
}

// The shared object that called the allocation API: the first frame of the calling thread's stack
// outside CUPTI, the driver, the runtime, this module and libc. CUPTI's own `source` field
// (MEMORY2) names it the same way, so both paths file allocations under the same labels.
std::string CallingLibrary() {
  void* frames[64];
  const int depth = backtrace(frames, 64);
  for (int i = 0; i < depth; ++i) {
    Dl_info info{};
    if (dladdr(frames[i], &info) == 0 || info.dli_fname == nullptr) continue;
    const std::string_view path = info.dli_fname;
    const std::string_view base = PathBasename(path);
    if (Contains(base, "libcupti") || base.rfind("libcuda.so", 0) == 0 ||
        Contains(base, "libcudart") || Contains(base, "kbv_native") ||
        base.rfind("libc.so", 0) == 0 || Contains(base, "ld-linux")) {
      continue;
    }
    return std::string(path);
  }
  return {};
}

// Runtime allocation APIs call the driver's: while one is running on this thread, the driver
// callbacks it causes are not counted again.
thread_local int runtime_alloc_depth = 0;

bool IsRuntimeAllocApi(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
      return true;
    default:
      return false;
  }
}

// What one runtime or driver allocation API did, from its parameters at exit: {alloc, address,
// bytes}; false for a call that is not an allocation API or allocated nothing.
bool ReadAllocation(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params,
                    ApiAllocRecord& r) {
  if (params == nullptr) return false;
  auto out = [&r](bool alloc, const void* address, std::uint64_t bytes) {
    r.alloc = alloc;
    r.address = reinterpret_cast<std::uint64_t>(address);
    r.bytes = bytes;
    return address != nullptr;
  };
  auto dev = [&r](bool alloc, CUdeviceptr address, std::uint64_t bytes) {
    r.alloc = alloc;
    r.address = static_cast<std::uint64_t>(address);
    r.bytes = bytes;
    return address != 0;
  };
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
        const auto* p = static_cast<const cudaMalloc_v3020_params*>(params);
        return p->devPtr != nullptr && out(true, *p->devPtr, p->size);
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
        const auto* p = static_cast<const cudaMallocPitch_v3020_params*>(params);
        return p->devPtr != nullptr && p->pitch != nullptr &&
               out(true, *p->devPtr, std::uint64_t{*p->pitch} * p->height);
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
        const auto* p = static_cast<const cudaMallocManaged_v6000_params*>(params);
        return p->devPtr != nullptr && out(true, *p->devPtr, p->size);
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
        const auto* p = static_cast<const cudaMallocAsync_v11020_params*>(params);
        return p->devPtr != nullptr && out(true, *p->devPtr, p->size);
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
        const auto* p = static_cast<const cudaMallocFromPoolAsync_v11020_params*>(params);
        return p->ptr != nullptr && out(true, *p->ptr, p->size);
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
        return out(false, static_cast<const cudaFree_v3020_params*>(params)->devPtr, 0);
      case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
        return out(false, static_cast<const cudaFreeAsync_v11020_params*>(params)->devPtr, 0);
      default:
        return false;
    }
  }
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const auto* p = static_cast<const cuMemAlloc_v2_params*>(params);
      return p->dptr != nullptr && dev(true, *p->dptr, p->bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const auto* p = static_cast<const cuMemAllocPitch_v2_params*>(params);
      return p->dptr != nullptr && p->pPitch != nullptr &&
             dev(true, *p->dptr, std::uint64_t{*p->pPitch} * p->Height);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const auto* p = static_cast<const cuMemAllocManaged_params*>(params);
      return p->dptr != nullptr && dev(true, *p->dptr, p->bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const auto* p = static_cast<const cuMemAllocAsync_params*>(params);
      return p->dptr != nullptr && dev(true, *p->dptr, p->bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const auto* p = static_cast<const cuMemAllocFromPoolAsync_params*>(params);
      return p->dptr != nullptr && dev(true, *p->dptr, p->bytesize);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      return dev(false, static_cast<const cuMemFree_v2_params*>(params)->dptr, 0);
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      return dev(false, static_cast<const cuMemFreeAsync_params*>(params)->dptr, 0);
    default:
      return false;
  }
}

bool Succeeded(CUpti_CallbackDomain domain, const CUpti_CallbackData* cb) {
  if (cb->functionReturnValue == nullptr) return false;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    return *static_cast<const cudaError_t*>(cb->functionReturnValue) == cudaSuccess;
  }
  return *static_cast<const CUresult*>(cb->functionReturnValue) == CUDA_SUCCESS;
}

void RecordAllocation(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                      const CUpti_CallbackData* cb) {
  TraceCollector& state = Collector();
  ApiAllocRecord r;
  if (!ReadAllocation(domain, cbid, cb->functionParams, r)) return;
  r.correlation = cb->correlationId;
  CUdevice device = 0;
  if (state.CtxGetDevice != nullptr && state.CtxGetDevice(&device) == CUDA_SUCCESS) {
    r.device = static_cast<int>(device);
  }
  if (r.alloc) r.source = CallingLibrary();
  std::uint64_t now = 0;
  if (state.api.GetTimestamp(&now) != CUPTI_SUCCESS) now = 0;
  r.timestamp = now;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.active) state.collected.api_allocs.push_back(std::move(r));
}

// The kernel-launch APIs of both layers (graph launches apart: their kernels were captured
// earlier, possibly by other code). A runtime launch calls the driver's; both are recorded, each
// under its own correlation id, with the same calling library (the runtime's and the driver's
// frames are skipped), so a kernel pairs with whichever of the two CUPTI gives it.
bool IsLaunchApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, bool& graph) {
  graph = false;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
        graph = true;
        return true;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
#if CUPTI_API_VERSION >= 130000
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:  // CUDA 13's <<<...>>>
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
#endif
        return true;
      default:
        return false;
    }
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      graph = true;
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return true;
    default:
      return false;
  }
}

// Who launched: read at the API's entry, on the launching thread (the stack is the caller's).
void RecordLaunch(const CUpti_CallbackData* cb, bool graph) {
  TraceCollector& state = Collector();
  if (!state.record_activities.load()) return;
  LaunchRecord r;
  r.correlation = cb->correlationId;
  r.graph = graph;
  r.source = CallingLibrary();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.active) state.collected.launches.push_back(std::move(r));
}

void CUPTIAPI ApiCallback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  if (data == nullptr) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (bool graph = false; IsLaunchApi(domain, cbid, graph)) {
    if (cb->callbackSite == CUPTI_API_ENTER) RecordLaunch(cb, graph);
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (!IsRuntimeAllocApi(cbid)) return;
    if (cb->callbackSite == CUPTI_API_ENTER) {
      ++runtime_alloc_depth;
      return;
    }
    if (runtime_alloc_depth > 0) --runtime_alloc_depth;
    if (Succeeded(domain, cb)) RecordAllocation(domain, cbid, cb);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (cb->callbackSite != CUPTI_API_EXIT || !Succeeded(domain, cb)) return;
  TraceCollector& state = Collector();
  VmmRecord v;
  v.correlation = cb->correlationId;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      const auto* p = static_cast<const cuMemCreate_params*>(cb->functionParams);
      if (p == nullptr || p->handle == nullptr) return;
      v.op = VmmRecord::Op::kCreate;
      v.handle = static_cast<std::uint64_t>(*p->handle);
      v.bytes = p->size;
      if (p->prop != nullptr && p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        v.device = p->prop->location.id;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      const auto* p = static_cast<const cuMemRelease_params*>(cb->functionParams);
      if (p == nullptr) return;
      v.op = VmmRecord::Op::kRelease;
      v.handle = static_cast<std::uint64_t>(p->handle);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap:
      v.op = VmmRecord::Op::kMap;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
      v.op = VmmRecord::Op::kUnmap;
      break;
    default:
      // A driver allocation API called by a runtime one is counted at the runtime's exit.
      if (runtime_alloc_depth == 0) RecordAllocation(domain, cbid, cb);
      return;
  }
  std::uint64_t now = 0;
  if (state.api.GetTimestamp(&now) != CUPTI_SUCCESS) now = 0;
  v.timestamp = now;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.active) state.collected.vmm.push_back(v);
}

struct ApiCallbackId {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
};

// Every API callback a trace enables: VMM, then the allocation APIs of both layers. MEMORY2
// should report the same allocations; on the H200 (driver 580, CUPTI 13.0) none was counted, so
// the callbacks are what counts there (records of the same correlation are not counted twice).
constexpr ApiCallbackId kTraceCallbacks[] = {
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRelease},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020},
};

// The launch callbacks a trace that records activities enables beside kTraceCallbacks.
constexpr ApiCallbackId kLaunchCallbacks[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API,
     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060},
#if CUPTI_API_VERSION >= 130000
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000},
#endif
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunch},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz},
};

// ---- initialising the collector (once per process) --------------------------------------------

// Loads libcupti, subscribes and registers the buffer callbacks. Returns "" or why CUPTI cannot be
// used. Called with init_mutex held; the outcome is kept for the life of the process.
std::string InitializeLocked(TraceCollector& state) {
  CuptiApi& api = state.api;
  if (std::string error = LoadCupti(api); !error.empty()) return error;
  CUptiResult status = CUPTI_SUCCESS;

  // The device of an allocation API call is that of the calling thread's current context.
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    state.CtxGetDevice = reinterpret_cast<CUresult (*)(CUdevice*)>(dlsym(driver, "cuCtxGetDevice"));
  }
  if (state.CtxGetDevice == nullptr) {
    state.init_notes.push_back(
        "cuCtxGetDevice not found in the loaded libcuda: allocation API calls are counted for "
        "the traced device whatever their device");
  }
  // backtrace() loads its unwinder on first use: do it now, not inside a CUPTI callback.
  {
    void* frame[2];
    backtrace(frame, 2);
  }

  // Subscribing first detects another CUPTI client (a profiler, Nsight, torch.profiler).
  if (api.SubscribeV2 != nullptr) {
    char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {0};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "kbv MemoryTrace";
    params.oldSubscriberName = old_name;
    params.oldSubscriberSize = sizeof(old_name);
    status = api.SubscribeV2(&state.subscriber, &ApiCallback, nullptr, &params);
    if (status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      return std::string("CUPTI is already in use by another client (") +
             (old_name[0] ? old_name : "a profiler or NVIDIA tool") +
             "): " + CuptiResultText(api, status);
    }
  } else {
    status = api.Subscribe(&state.subscriber, &ApiCallback, nullptr);
  }
  if (status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return "CUPTI is already in use by another client (a profiler or NVIDIA tool): " +
           CuptiResultText(api, status);
  }
  if (status != CUPTI_SUCCESS) return "cuptiSubscribe failed: " + CuptiResultText(api, status);
  state.callbacks_ok = true;

  // The `source` field of CUpti_ActivityMemory4 is read only from a library at least as new as the
  // header this module was built with.
  if (api.EnableAllocationSource == nullptr) {
    state.init_notes.push_back(
        "libcupti has no cuptiActivityEnableAllocationSource: by_source groups by memory kind");
  } else if (api.version < CUPTI_API_VERSION) {
    state.init_notes.push_back("libcupti API version " + std::to_string(api.version) +
                               " is older than the headers' " + std::to_string(CUPTI_API_VERSION) +
                               ": allocation sources not read; by_source groups by memory kind");
  } else {
    // Switched on inside each trace only (it costs time on every allocation).
    state.source_readable = true;
  }
  status = api.RegisterCallbacks(&BufferRequested, &BufferCompleted);
  if (status != CUPTI_SUCCESS) {
    // Give the subscription back so another tool can still use CUPTI.
    if (api.Unsubscribe != nullptr) api.Unsubscribe(state.subscriber);
    state.subscriber = nullptr;
    state.callbacks_ok = false;
    return "cuptiActivityRegisterCallbacks failed: " + CuptiResultText(api, status);
  }

  return {};
}

}  // namespace

std::string InitializeCollector() {
  TraceCollector& state = Collector();
  std::lock_guard<std::mutex> lock(state.init_mutex);
  if (!state.initialized) {
    state.init_error = InitializeLocked(state);
    state.initialized = true;
  }
  return state.init_error;
}

bool StartCollecting() {
  TraceCollector& state = Collector();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.active) return false;
  state.collected = CollectedTrace{};
  state.active = true;
  return true;
}

void StopCollecting() {
  TraceCollector& state = Collector();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.active = false;
}

CollectedTrace TakeCollected() {
  TraceCollector& state = Collector();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.active = false;
  state.record_activities = false;
  CollectedTrace taken = std::move(state.collected);
  state.collected = CollectedTrace{};
  return taken;
}

CUptiResult EnableTraceCallbacks() {
  TraceCollector& state = Collector();
  for (const ApiCallbackId& id : kTraceCallbacks) {
    const CUptiResult s = state.api.EnableCallback(1, state.subscriber, id.domain, id.cbid);
    if (s != CUPTI_SUCCESS) return s;
  }
  return CUPTI_SUCCESS;
}

int SetLaunchCallbacks(uint32_t enable, std::string* refused) {
  TraceCollector& state = Collector();
  int done = 0;
  for (const ApiCallbackId& id : kLaunchCallbacks) {
    const CUptiResult s = state.api.EnableCallback(enable, state.subscriber, id.domain, id.cbid);
    if (s == CUPTI_SUCCESS) {
      ++done;
    } else if (refused != nullptr) {
      *refused += (refused->empty() ? "" : ", ") +
                  std::string(id.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime " : "driver ") +
                  std::to_string(id.cbid) + " (" + CuptiResultText(state.api, s) + ")";
    }
  }
  return done;
}

CUptiResult SetTraceCallbacks(uint32_t enable) {
  TraceCollector& state = Collector();
  CUptiResult first = CUPTI_SUCCESS;
  for (const ApiCallbackId& id : kTraceCallbacks) {
    const CUptiResult s = state.api.EnableCallback(enable, state.subscriber, id.domain, id.cbid);
    if (s != CUPTI_SUCCESS && first == CUPTI_SUCCESS) first = s;
  }
  return first;
}

}  // namespace kbv::native
