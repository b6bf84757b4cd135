#include "native/gpu_trace_reduction.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "native/allocation_source.h"
#include "native/gpu_trace_peak.h"

namespace kbv::native {
namespace {

// The memory kinds that live on the device and count toward the peak. Pinned and pageable host
// allocations are reported apart (host_allocated_bytes).
bool IsDeviceKind(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kPageable:
    case MemoryKind::kPinned:
      return false;
    default:
      return true;  // device, array, managed, device/managed static, unknown (counted, to be safe)
  }
}

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kUnknown:
      return "unknown";
    case MemoryKind::kPageable:
      return "pageable";
    case MemoryKind::kPinned:
      return "pinned";
    case MemoryKind::kDevice:
      return "device";
    case MemoryKind::kArray:
      return "array";
    case MemoryKind::kManaged:
      return "managed";
    case MemoryKind::kDeviceStatic:
      return "device_static";
    case MemoryKind::kManagedStatic:
      return "managed_static";
    default:
      return "other";
  }
}

// A kernel's name as a person (and the trace's judge, which looks for the candidate's own
// __global__ names as whole identifiers) reads it; the name itself where it does not demangle.
std::string Demangle(const std::string& name) {
  // Only C++ symbols: a bare extern "C" name such as "f" would demangle as a type ("float").
  if (!name.starts_with("_Z")) return name;
  int status = 0;
  char* text = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || text == nullptr) return name;
  std::string out(text);
  std::free(text);
  return out;
}

}  // namespace

MemoryTraceResult ReduceTrace(const TraceBlock& block, CollectedTrace collected) {
  MemoryTraceResult out;
  out.notes = block.notes;
  out.start_ns = block.start_ns;
  out.end_ns = block.end_ns;
  out.stack_limit_before = block.stack_limit_before;
  out.thread_capacity = block.thread_capacity;
  out.records = collected.records;
  out.memory2_seen = collected.memory2_seen;
  out.dropped = collected.dropped;
  out.record_errors = collected.record_errors;
  if (out.dropped > 0) {
    out.notes.push_back(std::to_string(out.dropped) +
                        " activity records dropped: the figure is "
                        "incomplete");
  }

  const std::uint64_t start = block.start_ns;
  const std::uint64_t end = block.end_ns;
  auto in_window = [start, end](std::uint64_t t) { return t >= start && t <= end; };
  const int device_index = block.device;
  const auto device = static_cast<std::uint32_t>(device_index);

  // VMM: counted from the callbacks unless MEMORY2 already reported the same driver calls.
  std::unordered_set<std::uint32_t> vmm_correlations;
  for (const VmmRecord& v : collected.vmm) {
    if (in_window(v.timestamp)) vmm_correlations.insert(v.correlation);
  }
  bool memory2_covers_vmm = false;
  std::unordered_set<std::uint32_t> memory2_correlations;
  std::unordered_map<std::uint32_t, std::string> stack_source;  // correlation -> calling library
  for (const ApiAllocRecord& a : collected.api_allocs) {
    if (a.alloc && !a.source.empty()) stack_source.emplace(a.correlation, a.source);
  }

  std::vector<MemEvent> events;
  events.reserve(collected.memory.size() + collected.vmm.size());
  for (MemoryRecord& m : collected.memory) {
    if (!in_window(m.timestamp)) continue;
    if (m.op != MemoryOp::kAllocation && m.op != MemoryOp::kRelease) continue;
    if (m.device != device) {
      ++out.other_device_records;
      continue;
    }
    if (vmm_correlations.count(m.correlation) != 0) memory2_covers_vmm = true;
    memory2_correlations.insert(m.correlation);
    const bool alloc = m.op == MemoryOp::kAllocation;
    if (!IsDeviceKind(m.kind)) {
      if (alloc) out.host_allocated_bytes += static_cast<std::int64_t>(m.bytes);
      continue;
    }
    ++out.memory_records;
    if (m.pool_size > 0) {
      out.pool_peak_size_bytes =
          std::max(out.pool_peak_size_bytes, static_cast<std::int64_t>(m.pool_size));
      out.pool_peak_utilized_bytes =
          std::max(out.pool_peak_utilized_bytes, static_cast<std::int64_t>(m.pool_utilized));
    }
    MemEvent e;
    e.timestamp_ns = m.timestamp;
    e.key = m.address;
    e.space = 0;
    e.op = alloc ? MemEvent::Op::kAlloc : MemEvent::Op::kFree;
    e.bytes = static_cast<std::int64_t>(m.bytes);
    // The calling library read from the stack by the API callback of the same call, when there
    // is one, over CUPTI's `source`: on the H200 CUPTI named libc10_cuda.so as the source of
    // cuMemAlloc calls made through ctypes, which filed them under torch and out of the peak.
    if (alloc) {
      if (auto it = stack_source.find(m.correlation); it != stack_source.end()) {
        if (it->second != m.source) ++out.sources_from_stack;
        m.source = it->second;
      }
    }
    if (!m.source.empty()) {
      out.attribution = "library";
      e.source = ClassifyAllocationSource(m.source);
      if (alloc) out.by_library_allocated[std::string(PathBasename(m.source))] += e.bytes;
      // CUPTI's own buffers are the measurement's cost, not the measured code's.
      if (e.source == "cupti") {
        if (alloc) out.tracer_allocated_bytes += e.bytes;
        continue;
      }
    } else {
      e.source = std::string("kind:") + MemoryKindName(m.kind);
    }
    events.push_back(std::move(e));
  }

  // Allocation APIs seen by the callbacks, where MEMORY2 did not report the same call.
  for (ApiAllocRecord& a : collected.api_allocs) {
    if (!in_window(a.timestamp)) continue;
    ++out.api_allocation_records;
    if (memory2_correlations.count(a.correlation) != 0) continue;
    if (a.device >= 0 && a.device != device_index) {
      ++out.other_device_records;
      continue;
    }
    ++out.api_allocations_counted;
    MemEvent e;
    e.timestamp_ns = a.timestamp;
    e.key = a.address;
    e.space = 0;  // device addresses, as MEMORY2's: a release pairs with either record
    e.op = a.alloc ? MemEvent::Op::kAlloc : MemEvent::Op::kFree;
    e.bytes = static_cast<std::int64_t>(a.bytes);
    if (a.alloc) {
      if (a.source.empty()) {
        e.source = "unknown";
      } else {
        out.attribution = "library";
        e.source = ClassifyAllocationSource(a.source);
        out.by_library_allocated[std::string(PathBasename(a.source))] += e.bytes;
        if (e.source == "cupti") {
          out.tracer_allocated_bytes += e.bytes;
          continue;
        }
      }
    }
    events.push_back(std::move(e));
  }
  if (out.api_allocations_counted > 0) {
    out.allocations_counted_via = out.memory_records > 0 ? "memory2+callback" : "callback";
  } else if (out.memory_records > 0) {
    out.allocations_counted_via = "memory2";
  }

  std::int64_t vmm_creates = 0;
  for (const VmmRecord& v : collected.vmm) {
    if (!in_window(v.timestamp)) continue;
    ++out.vmm_events;
    if (v.op == VmmRecord::Op::kMap || v.op == VmmRecord::Op::kUnmap) {
      ++out.vmm_maps;
      continue;
    }
    if (memory2_covers_vmm) continue;
    MemEvent e;
    e.timestamp_ns = v.timestamp;
    e.key = v.handle;
    e.space = 1;
    e.source = "vmm";
    if (v.op == VmmRecord::Op::kCreate) {
      if (v.device != device_index) continue;
      ++vmm_creates;
      e.op = MemEvent::Op::kAlloc;
      e.bytes = static_cast<std::int64_t>(v.bytes);
    } else {
      e.op = MemEvent::Op::kFree;
    }
    events.push_back(std::move(e));
  }
  if (memory2_covers_vmm) {
    out.vmm_counted_via = "memory2";
  } else if (vmm_creates > 0) {
    out.vmm_counted_via = "callback";
  }
  if (!block.callbacks_enabled) out.vmm_counted_via = "none";

  for (const PoolRecord& p : collected.pools) {
    if (!in_window(p.timestamp) || p.device != device) continue;
    ++out.pool_records;
    out.pool_peak_size_bytes =
        std::max(out.pool_peak_size_bytes, static_cast<std::int64_t>(p.size));
    out.pool_peak_utilized_bytes =
        std::max(out.pool_peak_utilized_bytes, static_cast<std::int64_t>(p.utilized));
  }

  // Who launched each kernel: the launch callback of the same correlation id. Launch records
  // carry no timestamp; their correlation ids are unique within the process, so a record of an
  // earlier trace cannot pair with a kernel of this one (and the collector drops them anyway).
  std::unordered_map<std::uint32_t, std::string> launcher_of;
  for (const LaunchRecord& l : collected.launches) {
    ++out.launch_records;
    launcher_of.emplace(l.correlation,
                        l.graph ? std::string("graph") : ClassifyAllocationSource(l.source));
  }
  for (const KernelRecord& k : collected.kernels) {
    if (k.device != device || k.start == 0 || !in_window(k.start)) continue;
    std::string launcher;
    if (auto it = launcher_of.find(k.correlation); k.correlation != 0 && it != launcher_of.end()) {
      launcher = it->second;
      ++out.kernels_with_launcher;
    }
    if (block.record_activities) {
      out.activities.push_back(
          {"kernel", Demangle(k.name), k.stream, k.start, k.end, std::move(launcher)});
    }
    ++out.kernels;
    if (out.kernel_first_start_ns == 0 || k.start < out.kernel_first_start_ns) {
      out.kernel_first_start_ns = k.start;
    }
    out.kernel_last_end_ns = std::max(out.kernel_last_end_ns, k.end);
    out.local_memory_reserved_bytes =
        std::max(out.local_memory_reserved_bytes, static_cast<std::int64_t>(k.local_total));
    out.local_memory_per_thread_max =
        std::max(out.local_memory_per_thread_max, static_cast<std::int64_t>(k.local_per_thread));
  }
  if (block.record_activities) {
    for (const TransferRecord& t : collected.transfers) {
      if (t.device != device || t.start == 0 || !in_window(t.start)) continue;
      out.activities.push_back(
          {t.fill ? "fill" : "copy", t.fill ? "Memset" : "Memcpy", t.stream, t.start, t.end, ""});
    }
    std::sort(
        out.activities.begin(), out.activities.end(),
        [](const ActivityRecord& a, const ActivityRecord& b) { return a.start_ns < b.start_ns; });
  }

  out.stack_limit_after = block.stack_limit_after;
  if (!block.stack_limit_after_error.empty()) {
    out.notes.push_back("local memory (exit): " + block.stack_limit_after_error);
  }
  if (out.stack_limit_before >= 0 && out.thread_capacity > 0) {
    const std::int64_t needed = std::max(out.stack_limit_after, out.local_memory_per_thread_max);
    if (needed > out.stack_limit_before) {
      out.local_memory_bytes = (needed - out.stack_limit_before) * out.thread_capacity;
    }
    constexpr std::int64_t kDefaultStackBytes = 1024;  // cudaLimitStackSize's default
    if (needed > kDefaultStackBytes) {
      out.local_memory_above_default_bytes = (needed - kDefaultStackBytes) * out.thread_capacity;
    }
  } else {
    out.notes.push_back("local memory growth unknown (stack limit or thread capacity unreadable)");
  }

  std::vector<MemEvent> non_torch;
  non_torch.reserve(events.size());
  for (const MemEvent& e : events) {
    if (e.source != "torch") non_torch.push_back(e);
  }
  out.peak_excluding_torch_bytes = PeakFromEvents(std::move(non_torch)).peak_bytes;
  out.peak = PeakFromEvents(std::move(events));
  if (out.peak.duplicate_allocs > 0) {
    out.notes.push_back(std::to_string(out.peak.duplicate_allocs) +
                        " allocations of a still-live address (a release record is missing)");
  }
  return out;
}

}  // namespace kbv::native
