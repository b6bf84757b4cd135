// kbv_native: the Python bindings. The worker imports torch first (so the CUDA runtime this module
// shares is torch's) and then this module.

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>

#include "native/allocation_source.h"
#include "native/cpu_timer.h"
#include "native/gpu_trace.h"
#include "native/gpu_trace_peak.h"
#include "native/nvml_probe.h"
#include "native/rss.h"

#if KBV_NATIVE_CUDA
#include "native/cuda_timer.h"
#include "native/gpu_state.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace kbv::native {
namespace {

#if KBV_NATIVE_CUDA
constexpr bool kHasCuda = true;
#else
constexpr bool kHasCuda = false;

[[noreturn]] void ThrowNoCuda() { throw std::runtime_error("kbv_native was built without CUDA"); }
#endif

nb::dict TimeCudaBinding(const nb::callable& fn, int calls, int warmup, std::uintptr_t stream,
                         bool flush_l2, bool block, double block_timeout_ms,
                         bool stop_on_block_timeout) {
#if KBV_NATIVE_CUDA
  CudaTimingOptions options;
  options.calls = calls;
  options.warmup = warmup;
  options.stream = reinterpret_cast<cudaStream_t>(stream);
  options.flush_l2 = flush_l2;
  options.block = block;
  options.block_timeout_ms = block_timeout_ms;
  options.stop_on_block_timeout = stop_on_block_timeout;
  const CudaTimingResult result = TimeCuda(fn, options);
  nb::dict out;
  out["samples_ms"] = result.samples_ms;
  out["sample_block_timeout"] = result.sample_block_timeout;
  out["block_timeouts"] = result.block_timeouts;
  out["stopped_early"] = result.stopped_early;
  out["l2_bytes"] = result.l2_bytes;
  out["flush_bytes"] = result.flush_bytes;
  return out;
#else
  (void)fn, (void)calls, (void)warmup, (void)stream, (void)flush_l2, (void)block;
  (void)block_timeout_ms, (void)stop_on_block_timeout;
  ThrowNoCuda();
#endif
}

std::pair<std::size_t, std::size_t> CudaMemGetInfoBinding() {
#if KBV_NATIVE_CUDA
  return CudaMemGetInfo();
#else
  ThrowNoCuda();
#endif
}

nb::dict L2PersistingBinding(std::uintptr_t stream) {
#if KBV_NATIVE_CUDA
  const L2PersistingState state = ReadL2Persisting(reinterpret_cast<cudaStream_t>(stream));
  nb::dict out;
  out["limit_bytes"] = state.limit_bytes;
  out["max_limit_bytes"] = state.max_limit_bytes;
  out["window_base"] = state.window_base;
  out["window_bytes"] = state.window_bytes;
  out["window_hit_ratio"] = state.window_hit_ratio;
  out["window_hit_property"] = state.window_hit_property;
  return out;
#else
  (void)stream;
  ThrowNoCuda();
#endif
}

void ResetL2PersistingBinding(std::uintptr_t stream) {
#if KBV_NATIVE_CUDA
  ResetL2Persisting(reinterpret_cast<cudaStream_t>(stream));
#else
  (void)stream;
  ThrowNoCuda();
#endif
}

void FillDeviceBinding(std::uintptr_t ptr, int value, std::size_t bytes, std::uintptr_t stream) {
#if KBV_NATIVE_CUDA
  FillDevice(ptr, value, bytes, reinterpret_cast<cudaStream_t>(stream));
#else
  (void)ptr, (void)value, (void)bytes, (void)stream;
  ThrowNoCuda();
#endif
}

void ReleaseScratchBinding() {
#if KBV_NATIVE_CUDA
  ReleaseScratch();
#endif
}

// ---- memory tracer ----------------------------------------------------------------------------

nb::dict PeakDict(const PeakResult& peak) {
  nb::dict out;
  out["peak_bytes"] = peak.peak_bytes;
  out["peak_timestamp_ns"] = peak.peak_timestamp_ns;
  out["allocated_bytes"] = peak.allocated_bytes;
  out["freed_bytes"] = peak.freed_bytes;
  out["live_at_exit_bytes"] = peak.live_at_exit_bytes;
  out["allocations"] = peak.allocations;
  out["frees"] = peak.frees;
  out["untracked_frees"] = peak.untracked_frees;
  out["duplicate_allocs"] = peak.duplicate_allocs;
  out["by_source"] = peak.by_source_at_peak;
  out["by_source_allocated"] = peak.by_source_allocated;
  out["by_source_live_at_exit"] = peak.by_source_live_at_exit;
  return out;
}

// events: an iterable of (timestamp_ns, address, bytes, source) or (timestamp_ns, address, bytes,
// source, space); bytes > 0 allocates, bytes < 0 releases the block at that address (its size is
// the one it was allocated with), 0 is ignored.
nb::dict PeakFromEventsBinding(const nb::iterable& events) {
  std::vector<MemEvent> parsed;
  for (nb::handle item : events) {
    const std::size_t n = nb::len(item);
    if (n != 4 && n != 5) {
      throw nb::value_error(
          "each event is (timestamp_ns, address, bytes, source[, space]), bytes < 0 for a release");
    }
    const auto timestamp = nb::cast<std::int64_t>(item[0]);
    const auto address = nb::cast<std::uint64_t>(item[1]);
    const auto bytes = nb::cast<std::int64_t>(item[2]);
    if (timestamp < 0) throw nb::value_error("timestamp_ns must be >= 0");
    if (bytes == 0) continue;
    MemEvent event;
    event.timestamp_ns = static_cast<std::uint64_t>(timestamp);
    event.key = address;
    event.op = bytes > 0 ? MemEvent::Op::kAlloc : MemEvent::Op::kFree;
    event.bytes = bytes > 0 ? bytes : -bytes;
    event.source = nb::cast<std::string>(item[3]);
    if (n == 5) event.space = nb::cast<std::uint8_t>(item[4]);
    parsed.push_back(std::move(event));
  }
  return PeakDict(PeakFromEvents(std::move(parsed)));
}

nb::dict MemoryTraceSummary(const MemoryTrace& trace) {
  const MemoryTraceResult& r = trace.result();
  nb::dict out = PeakDict(r.peak);
  out["available"] = trace.available();
  out["why_unavailable"] = trace.why_unavailable();
  out["completed"] = trace.completed();
  out["valid"] = trace.valid();
  out["device"] = trace.device();
  out["peak_excluding_torch_bytes"] = r.peak_excluding_torch_bytes;
  out["records"] = r.records;
  out["dropped"] = r.dropped;
  out["record_errors"] = r.record_errors;
  out["memory_records"] = r.memory_records;
  out["other_device_records"] = r.other_device_records;
  out["memory2_seen"] = r.memory2_seen;
  out["api_allocation_records"] = r.api_allocation_records;
  out["api_allocations_counted"] = r.api_allocations_counted;
  out["allocations_counted_via"] = r.allocations_counted_via;
  out["sources_from_stack"] = r.sources_from_stack;
  out["host_allocated_bytes"] = r.host_allocated_bytes;
  out["tracer_allocated_bytes"] = r.tracer_allocated_bytes;
  out["attribution"] = r.attribution;
  out["by_library_allocated"] = r.by_library_allocated;
  out["pool_records"] = r.pool_records;
  out["pool_peak_size_bytes"] = r.pool_peak_size_bytes;
  out["pool_peak_utilized_bytes"] = r.pool_peak_utilized_bytes;
  out["vmm_events"] = r.vmm_events;
  out["vmm_maps"] = r.vmm_maps;
  out["vmm_counted_via"] = r.vmm_counted_via;
  out["local_memory_bytes"] = r.local_memory_bytes;
  out["local_memory_above_default_bytes"] = r.local_memory_above_default_bytes;
  out["local_memory_reserved_bytes"] = r.local_memory_reserved_bytes;
  out["local_memory_per_thread_max"] = r.local_memory_per_thread_max;
  out["stack_limit_before"] = r.stack_limit_before;
  out["stack_limit_after"] = r.stack_limit_after;
  out["thread_capacity"] = r.thread_capacity;
  out["kernels"] = r.kernels;
  out["kernel_first_start_ns"] = r.kernel_first_start_ns;
  out["kernel_last_end_ns"] = r.kernel_last_end_ns;
  nb::list activities;
  for (const ActivityRecord& a : r.activities) {
    nb::dict item;
    item["kind"] = a.kind;
    item["name"] = a.name;
    item["stream"] = a.stream;
    item["start_ns"] = a.start_ns;
    item["end_ns"] = a.end_ns;
    activities.append(item);
  }
  out["activities"] = activities;
  out["kernel_span_ns"] = r.kernel_last_end_ns > r.kernel_first_start_ns
                              ? r.kernel_last_end_ns - r.kernel_first_start_ns
                              : std::uint64_t{0};
  out["start_ns"] = r.start_ns;
  out["end_ns"] = r.end_ns;
  out["notes"] = r.notes;
  out["cupti_library"] = MemoryTrace::CuptiLibrary();
  return out;
}

nb::dict CuptiInitBinding() {
  CuptiStatus status;
  {
    nb::gil_scoped_release no_gil;
    status = InitializeCupti();
  }
  nb::dict out;
  out["error"] = status.error;
  out["library"] = status.library;
  out["version"] = status.version;
  out["allocation_source"] = status.allocation_source;
  out["callbacks"] = status.callbacks;
  out["notes"] = status.notes;
  return out;
}

// (sm_clock_mhz, clocks-event-reasons mask), -1 for a field NVML could not read.
std::pair<std::int64_t, std::int64_t> NvmlClocksBinding(int device) {
  NvmlClocks clocks;
  {
    nb::gil_scoped_release no_gil;
    clocks = ReadNvmlClocks(device);
  }
  return {clocks.sm_clock_mhz, clocks.reasons};
}

nb::dict NvmlSampleBinding(int device) {
  NvmlSample sample;
  {
    nb::gil_scoped_release no_gil;
    sample = SampleNvml(device);
  }
  auto opt = [](const auto& value) -> nb::object { return value ? nb::cast(*value) : nb::none(); };
  nb::dict out;
  out["device"] = device;
  out["name"] = sample.name;
  out["pci_bus_id"] = sample.pci_bus_id;
  out["matched_by"] = sample.matched_by;
  out["sm_clock_mhz"] = opt(sample.sm_clock_mhz);
  out["sm_clock_max_mhz"] = opt(sample.sm_clock_max_mhz);
  out["mem_clock_mhz"] = opt(sample.mem_clock_mhz);
  out["temperature_c"] = opt(sample.temperature_c);
  out["power_w"] = opt(sample.power_w);
  out["power_limit_w"] = opt(sample.power_limit_w);
  out["throttle_reasons"] = opt(sample.throttle_reasons);
  out["throttle_reason_names"] = sample.throttle_reason_names;
  out["errors"] = sample.errors;
  return out;
}

// Python's `with` protocol for a class with Enter()/Exit(): __enter__ returns the object itself,
// __exit__ runs Exit() without the GIL (it joins a sampler or flushes CUPTI buffers, neither
// needs Python) and never swallows an exception raised in the block.
template <typename T>
void BindContextManager(nb::class_<T>& cls) {
  cls.def(
         "__enter__",
         [](T& self) -> T& {
           self.Enter();
           return self;
         },
         nb::rv_policy::reference)
      .def("__exit__", [](T& self, nb::args) {
        {
          nb::gil_scoped_release no_gil;
          self.Exit();
        }
        return false;
      });
}

}  // namespace
}  // namespace kbv::native

NB_MODULE(kbv_native, m) {
  using namespace kbv::native;
  m.doc() = "kbv's native timing and memory probes for the Python worker.";
  m.attr("has_cuda") = kHasCuda;

  m.def("time_cpu", &TimeCpu, "fn"_a, "calls"_a, "warmup"_a,
        "Call fn(i) warmup times untimed, then `calls` more times, each timed on the host's "
        "steady clock. i counts on from the warm-up. Returns milliseconds, one per timed call.");

  m.def("time_cuda", &TimeCudaBinding, "fn"_a, "calls"_a, "warmup"_a, "stream"_a,
        "flush_l2"_a = true, "block"_a = true, "block_timeout_ms"_a = 2000.0,
        "stop_on_block_timeout"_a = true,
        "Time fn(i) on a CUDA stream (a cudaStream_t as int) with CUDA events: optional L2 flush "
        "before each call, optional blocking kernel hiding launch latency. Returns a dict with "
        "samples_ms, sample_block_timeout, block_timeouts, stopped_early, l2_bytes and "
        "flush_bytes.");

  m.def("cuda_mem_get_info", &CudaMemGetInfoBinding,
        "cudaMemGetInfo on the current device: (free_bytes, total_bytes).");

  m.def("release_scratch", &ReleaseScratchBinding,
        "Free the L2 flush buffers and the blocker's pinned flags.");

  m.def("rss_bytes", &RssBytes, "The process's current resident set size in bytes.");

  nb::class_<PeakRss> peak_rss(
      m, "PeakRss", "Context manager: the process's peak resident set size during the block.");
  BindContextManager(peak_rss);
  peak_rss.def(nb::init<bool>(), "use_hwm"_a = true)
      .def_prop_ro("baseline_bytes", &PeakRss::baseline_bytes)
      .def_prop_ro("peak_bytes", &PeakRss::peak_bytes)
      .def_prop_ro("method", &PeakRss::method);

  m.def("l2_persisting_state", &L2PersistingBinding, "stream"_a,
        "Persisting-L2 state of the stream's device: limit_bytes (cudaLimitPersistingL2CacheSize), "
        "max_limit_bytes (0: the device has none), and the stream's access-policy window "
        "(window_base, window_bytes, window_hit_ratio, window_hit_property; 2 = persisting).");

  m.def("reset_l2_persisting", &ResetL2PersistingBinding, "stream"_a,
        "Limit back to 0, the stream's access-policy window cleared, persisting lines demoted "
        "(cudaCtxResetPersistingL2Cache). No-op without persisting L2.");

  m.def("fill_device", &FillDeviceBinding, "ptr"_a, "value"_a, "bytes"_a, "stream"_a,
        "cudaMemsetAsync(ptr, value, bytes, stream): used to poison free allocator blocks.");

  m.def("_peak_from_events", &PeakFromEventsBinding, "events"_a,
        "The tracer's accounting on its own (no CUDA): events are (timestamp_ns, address, bytes, "
        "source[, space]) with bytes > 0 an allocation and bytes < 0 a release of the block at "
        "that address. Sorted by time (allocations before releases at equal timestamps); "
        "releases of blocks not allocated in the list are ignored. Returns a dict: peak_bytes, "
        "allocated_bytes, freed_bytes, live_at_exit_bytes, by_source (live bytes per source at "
        "the peak), by_source_allocated, by_source_live_at_exit, untracked_frees, "
        "duplicate_allocs, ...");

  m.def("_cupti_init", &CuptiInitBinding,
        "Load and initialise CUPTI now (the first MemoryTrace does it otherwise; the outcome is "
        "kept for the process). Returns error ('' when usable), library, version, "
        "allocation_source, callbacks, notes. Diagnostic.");

  m.def("_classify_allocation_source", &ClassifyAllocationSource, "path"_a,
        "The by_source label for an allocating shared object's path.");

  m.def("_decode_throttle_reasons", &DecodeThrottleReasons, "mask"_a,
        "Names of the bits set in an NVML clocks-event-reasons mask.");

  m.def("nvml_sample", &NvmlSampleBinding, "device"_a,
        "NVML snapshot of CUDA device `device`: sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz, "
        "temperature_c, power_w, power_limit_w, throttle_reasons (bitmask), "
        "throttle_reason_names, name, pci_bus_id, matched_by, errors (queries that failed; their "
        "fields are None). RuntimeError when NVML is not there or the build has no CUDA.");

  m.def("nvml_clocks", &NvmlClocksBinding, "device"_a,
        "The two NVML figures read around every timed sample, cheaply (the device handle is "
        "cached): (sm_clock_mhz, clocks-event-reasons bitmask), -1 where a query failed. "
        "RuntimeError when NVML is not there or the build has no CUDA.");

  nb::class_<MemoryTrace> memory_trace(
      m, "MemoryTrace",
      "Context manager around one forward call: every device allocation and release CUPTI sees "
      "(cudaMalloc/cuMemAlloc, async pools, VMM, library allocations), counted from 0 at "
      "__enter__. Synchronise the device before leaving the block. When CUPTI cannot be used "
      "(missing, refused, no GPU) the block still runs and `available` is False with "
      "`why_unavailable`. RuntimeError at construction in a build without CUDA.");
  BindContextManager(memory_trace);
  memory_trace.def(nb::init<int, bool>(), "device"_a, "activities"_a = false)
      .def_prop_ro("available", &MemoryTrace::available)
      .def_prop_ro("why_unavailable", &MemoryTrace::why_unavailable)
      .def_prop_ro("completed", &MemoryTrace::completed)
      .def_prop_ro("valid", &MemoryTrace::valid,
                   "completed, no dropped record, no corrupt buffer, no missing release")
      .def_prop_ro("device", &MemoryTrace::device)
      .def_prop_ro("peak_bytes", [](const MemoryTrace& t) { return t.result().peak.peak_bytes; })
      .def_prop_ro("allocated_bytes",
                   [](const MemoryTrace& t) { return t.result().peak.allocated_bytes; })
      .def_prop_ro("freed_bytes", [](const MemoryTrace& t) { return t.result().peak.freed_bytes; })
      .def_prop_ro("live_at_exit_bytes",
                   [](const MemoryTrace& t) { return t.result().peak.live_at_exit_bytes; })
      .def_prop_ro("peak_excluding_torch_bytes",
                   [](const MemoryTrace& t) { return t.result().peak_excluding_torch_bytes; })
      .def_prop_ro(
          "by_source", [](const MemoryTrace& t) { return t.result().peak.by_source_at_peak; },
          "live bytes per allocation source at the moment of the peak (sums to "
          "peak_bytes)")
      .def_prop_ro("by_source_allocated",
                   [](const MemoryTrace& t) { return t.result().peak.by_source_allocated; })
      .def_prop_ro("attribution", [](const MemoryTrace& t) { return t.result().attribution; })
      .def_prop_ro("local_memory_bytes",
                   [](const MemoryTrace& t) { return t.result().local_memory_bytes; })
      .def_prop_ro("records", [](const MemoryTrace& t) { return t.result().records; })
      .def_prop_ro("dropped", [](const MemoryTrace& t) { return t.result().dropped; })
      .def_prop_ro("notes", [](const MemoryTrace& t) { return t.result().notes; })
      .def("summary", &MemoryTraceSummary, "Every figure of the trace as a dict.")
      .def_static("cupti_library", &MemoryTrace::CuptiLibrary,
                  "Path of the libcupti in use ('' before the first trace or when none loaded).");
}
