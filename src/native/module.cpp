// kbv_native: the Python bindings. The worker imports torch first (so the CUDA runtime this module
// shares is torch's) and then this module.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "check/baseline.hpp"
#include "check/compare.hpp"
#include "check/measure.hpp"
#include "native/allocation_source.h"
#include "native/checksum.h"
#include "native/cpu_timer.h"
#include "native/gpu_trace.h"
#include "native/gpu_trace_peak.h"
#include "native/integrity.h"
#include "native/nvml_probe.h"
#include "native/rss.h"
#include "native/shared_arena.h"
#include "tensor/view.hpp"

#if KBV_NATIVE_CUDA
#include "native/cuda_timer.h"
#include "native/device_measure.h"
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

// ---- comparison passes and checksums ----------------------------------------------------------

// JSON (no NaN or infinity in it: check/measure.hpp encodes them as strings) as Python objects.
nb::object ToPython(const nlohmann::json& j) {
  using Type = nlohmann::json::value_t;
  switch (j.type()) {
    case Type::null:
      return nb::none();
    case Type::boolean:
      return nb::bool_(j.get<bool>());
    case Type::number_integer:
      return nb::int_(j.get<std::int64_t>());
    case Type::number_unsigned:
      return nb::int_(j.get<std::uint64_t>());
    case Type::number_float:
      return nb::float_(j.get<double>());
    case Type::string:
      return nb::str(j.get_ref<const std::string&>().c_str());
    case Type::array: {
      nb::list list;
      for (const auto& item : j) list.append(ToPython(item));
      return list;
    }
    case Type::object: {
      nb::dict dict;
      for (const auto& [key, value] : j.items()) dict[key.c_str()] = ToPython(value);
      return dict;
    }
    default:
      throw std::runtime_error("kbv_native: unexpected JSON value");
  }
}

tensor::DType ParseDtype(const std::string& name) {
  const auto dtype = tensor::parse_torch_dtype(name);
  if (!dtype) throw nb::value_error(("unknown dtype '" + name + "'").c_str());
  return *dtype;
}

// A float, or one of the strings "nan", "inf", "-inf" (how kbv's JSON carries them).
double DoubleFrom(nb::handle value) {
  if (nb::isinstance<nb::str>(value)) {
    try {
      return check::parse_double(nb::cast<std::string>(value));
    } catch (const std::invalid_argument& e) {
      throw nb::value_error(e.what());
    }
  }
  return nb::cast<double>(value);
}

check::PassSpec SpecFrom(const nb::dict& spec) {
  const auto field = [&](const char* name) -> nb::handle {
    if (!spec.contains(name)) throw nb::value_error((std::string("spec lacks ") + name).c_str());
    return spec[name];
  };
  check::PassSpec s;
  s.threshold = DoubleFrom(field("threshold"));
  s.scale = DoubleFrom(field("scale"));
  s.tol.abs = DoubleFrom(field("tol_abs"));
  s.tol.rel = DoubleFrom(field("tol_rel"));
  s.nan_equal = nb::cast<bool>(field("nan_equal"));
  if (spec.contains("sens")) s.sens = DoubleFrom(spec["sens"]);  // absent: no sensitivity term
  return s;
}

// Contiguous memory handed over by address: (ptr, dtype, numel, device) or, with a shape,
// (ptr, dtype, shape, device). device -1 is host memory.
struct Operand {
  const void* ptr = nullptr;
  tensor::DType dtype = tensor::DType::F32;
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
  int device = -1;

  tensor::TensorView view(const char* name) const {
    tensor::TensorView v = tensor::flat_view(ptr, dtype, numel, name);
    v.shape = shape;
    return v;
  }
};

Operand OperandFrom(nb::handle t, const char* what, bool shaped) {
  if (!nb::isinstance<nb::sequence>(t) || nb::len(t) != 4) {
    throw nb::value_error(
        (std::string(what) + " must be (ptr, dtype, " + (shaped ? "shape" : "numel") + ", device)")
            .c_str());
  }
  Operand o;
  o.ptr = reinterpret_cast<const void*>(nb::cast<std::uintptr_t>(t[0]));
  o.dtype = ParseDtype(nb::cast<std::string>(t[1]));
  if (shaped) {
    o.shape = nb::cast<std::vector<std::int64_t>>(t[2]);
    o.numel = 1;
    for (const std::int64_t d : o.shape) {
      if (d < 0 || (d > 0 && o.numel > INT64_MAX / d)) {
        throw nb::value_error((std::string(what) + " has an invalid shape").c_str());
      }
      o.numel *= d;
    }
  } else {
    o.numel = nb::cast<std::int64_t>(t[2]);
    if (o.numel < 0) throw nb::value_error((std::string(what) + ": numel < 0").c_str());
    o.shape = {o.numel};
  }
  o.device = nb::cast<int>(t[3]);
  if (o.numel > 0 && o.ptr == nullptr) {
    throw nb::value_error((std::string(what) + " has a null pointer").c_str());
  }
  return o;
}

void SameDevice(const Operand& a, const Operand& b) {
  if (a.device != b.device) {
    throw nb::value_error("both tensors must live on the same device (-1 for the host)");
  }
}

check::Measurement MeasureOn(const Operand& x, const Operand& y, const Operand* s,
                             const check::PassSpec& spec, std::uintptr_t stream) {
  if (x.device < 0) {
    if (s == nullptr) return check::measure(x.view("x"), y.view("y"), spec);
    const tensor::TensorView sv = s->view("sensitivity");
    return check::measure(x.view("x"), y.view("y"), spec, &sv);
  }
#if KBV_NATIVE_CUDA
  DeviceGuard guard(x.device);
  return MeasureDevice(x.ptr, x.dtype, y.ptr, y.dtype, x.numel, spec,
                       reinterpret_cast<cudaStream_t>(stream), s ? s->ptr : nullptr,
                       s ? s->dtype : tensor::DType::F32);
#else
  (void)stream;
  ThrowNoCuda();
#endif
}

double FiniteRmsOn(const Operand& t, double threshold, std::uintptr_t stream) {
  if (t.device < 0) return check::finite_rms(t.view("t"), threshold);
#if KBV_NATIVE_CUDA
  DeviceGuard guard(t.device);
  return FiniteRmsDevice(t.ptr, t.dtype, t.numel, threshold,
                         reinterpret_cast<cudaStream_t>(stream));
#else
  (void)stream;
  ThrowNoCuda();
#endif
}

nb::object MeasureBinding(nb::handle x, nb::handle y, const nb::dict& spec, std::uintptr_t stream,
                          nb::handle sensitivity) {
  const Operand a = OperandFrom(x, "x", false), b = OperandFrom(y, "y", false);
  SameDevice(a, b);
  if (a.numel != b.numel) throw nb::value_error("x and y differ in numel");
  std::optional<Operand> sens;
  if (!sensitivity.is_none()) {
    sens = OperandFrom(sensitivity, "sensitivity", false);
    SameDevice(a, *sens);
    if (sens->numel != a.numel) throw nb::value_error("the sensitivity differs from y in numel");
  }
  const check::PassSpec s = SpecFrom(spec);
  check::Measurement m;
  {
    nb::gil_scoped_release no_gil;
    m = MeasureOn(a, b, sens ? &*sens : nullptr, s, stream);
  }
  return ToPython(m.to_json());
}

nb::object DescribeOutputBinding(nb::handle reference, nb::handle truth, std::uintptr_t stream,
                                 nb::handle sensitivity, const std::string& policy_json) {
  const Operand r = OperandFrom(reference, "reference", true);
  const Operand t = OperandFrom(truth, "truth", true);
  SameDevice(r, t);
  std::optional<Operand> sens;
  if (!sensitivity.is_none()) {
    sens = OperandFrom(sensitivity, "sensitivity", false);
    SameDevice(r, *sens);
    if (sens->numel != t.numel) throw nb::value_error("the sensitivity differs from the truth");
  }
  std::optional<check::Policy> policy;
  if (!policy_json.empty()) {
    try {
      policy = check::Policy::from_json(nlohmann::json::parse(policy_json));
    } catch (const std::exception& e) {
      throw nb::value_error((std::string("a malformed policy: ") + e.what()).c_str());
    }
  }
  if (r.shape != t.shape) throw nb::value_error("the truth and the reference differ in shape");
  const bool same = r.ptr == t.ptr;
  if (same && r.dtype != t.dtype) {
    throw nb::value_error("the truth is the reference's memory, but of another dtype");
  }
  check::OutputBaseline b;
  {
    nb::gil_scoped_release no_gil;
    b = check::describe_baseline_with(
        r.dtype, r.shape, t.dtype, same,
        [&](double threshold) { return FiniteRmsOn(t, threshold, stream); },
        [&](double threshold) { return FiniteRmsOn(r, threshold, stream); },
        [&](const check::PassSpec& spec) { return MeasureOn(r, t, nullptr, spec, stream); });
    // The reference against its candidates' elementwise budget (check::Policy's admission of
    // the reference's own excess), while its output still exists.
    if (policy) {
      check::measure_baseline_budget(b, *policy, [&](const check::PassSpec& spec) {
        return MeasureOn(r, t, sens ? &*sens : nullptr, spec, stream);
      });
    }
  }
  return ToPython(b.to_json());
}

double FiniteRmsBinding(nb::handle t, nb::handle threshold, std::uintptr_t stream) {
  const Operand o = OperandFrom(t, "t", false);
  const double limit = DoubleFrom(threshold);
  nb::gil_scoped_release no_gil;
  return FiniteRmsOn(o, limit, stream);
}

std::uint64_t ChecksumBinding(std::uintptr_t ptr, std::size_t nbytes, int device, std::uint64_t key,
                              std::uintptr_t stream) {
  if (nbytes > 0 && ptr == 0) throw nb::value_error("a null pointer");
  nb::gil_scoped_release no_gil;
  return Checksum(reinterpret_cast<const void*>(ptr), nbytes, device, key,
                  reinterpret_cast<cudaStream_t>(stream));
}

std::vector<std::uint64_t> ChecksumsBinding(
    const std::vector<std::pair<std::uintptr_t, std::size_t>>& buffers, int device,
    std::uint64_t key, std::uintptr_t stream) {
  std::vector<ChecksumBuffer> list;
  list.reserve(buffers.size());
  for (const auto& [ptr, nbytes] : buffers) {
    if (nbytes > 0 && ptr == 0) throw nb::value_error("a null pointer");
    list.push_back({reinterpret_cast<const void*>(ptr), nbytes});
  }
  nb::gil_scoped_release no_gil;
  return Checksums(list, device, key, reinterpret_cast<cudaStream_t>(stream));
}

// ---- shared arenas ----------------------------------------------------------------------------

nb::dlpack::dtype DlpackDtype(tensor::DType d) {
  using Code = nb::dlpack::dtype_code;
  const auto of = [](Code code, int bits) {
    return nb::dlpack::dtype{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), 1};
  };
  switch (d) {
    case tensor::DType::F64:
      return of(Code::Float, 64);
    case tensor::DType::F32:
      return of(Code::Float, 32);
    case tensor::DType::F16:
      return of(Code::Float, 16);
    case tensor::DType::BF16:
      return of(Code::Bfloat, 16);
    case tensor::DType::I64:
      return of(Code::Int, 64);
    case tensor::DType::I32:
      return of(Code::Int, 32);
    case tensor::DType::I16:
      return of(Code::Int, 16);
    case tensor::DType::I8:
      return of(Code::Int, 8);
    case tensor::DType::U8:
      return of(Code::UInt, 8);
    case tensor::DType::Bool:
      return of(Code::Bool, 8);
  }
  throw std::logic_error("unhandled dtype");
}

// A row-major view of the arena's bytes at `offset`; it holds a reference to the arena object, so
// the arena outlives every view (until close() or revoke(), which the caller orders).
nb::ndarray<> ArenaView(nb::handle self, std::size_t offset, const std::string& dtype,
                        const std::vector<std::int64_t>& shape) {
  const SharedArena& arena = nb::cast<const SharedArena&>(self);
  const tensor::DType d = ParseDtype(dtype);
  const std::size_t size = tensor::element_size(d);
  std::size_t bytes = size;
  std::vector<std::size_t> dims;
  for (const std::int64_t dim : shape) {
    if (dim < 0) throw nb::value_error("a negative dimension");
    if (__builtin_mul_overflow(bytes, static_cast<std::size_t>(dim), &bytes)) {
      throw std::out_of_range("kbv_native: the view's size overflows");
    }
    dims.push_back(static_cast<std::size_t>(dim));
  }
  if (offset % size != 0) {
    throw nb::value_error(("offset " + std::to_string(offset) + " is not a multiple of the " +
                           std::to_string(size) + "-byte element")
                              .c_str());
  }
  void* data = arena.Slice(offset, bytes);
  const bool host = arena.device() < 0;
  return nb::ndarray<>(data, dims.size(), dims.data(), self, nullptr, DlpackDtype(d),
                       host ? nb::device::cpu::value : nb::device::cuda::value,
                       host ? 0 : arena.device());
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
  out["launch_records"] = r.launch_records;
  out["kernels_with_launcher"] = r.kernels_with_launcher;
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
    if (!a.launcher.empty()) item["launcher"] = a.launcher;
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
  // Before anything else can run in this process after the import (native/integrity.h).
  IntegrityInit();

  m.def("time_cpu", &TimeCpu, "fn"_a, "calls"_a, "warmup"_a,
        "Call fn(i) warmup times untimed, then `calls` more times, each timed on the kernel's "
        "monotonic clock. i counts on from the warm-up. Returns milliseconds, one per timed "
        "call.");

  m.def("integrity_changes", &IntegrityChanges,
        "What changed below Python since kbv_native was imported (its GOT slots, the first bytes "
        "of the functions they lead to and of the clock functions, its own code, the vDSO's), "
        "one line each, put back where possible; includes what the timing loops noted.");

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

  m.def("measure", &MeasureBinding, "x"_a, "y"_a, "spec"_a, "stream"_a = 0,
        "sensitivity"_a = nb::none(),
        "One comparison pass of x judged by y, where they live. x and y are (ptr, dtype, numel, "
        "device) of contiguous memory (dtype as torch names it, device -1 for the host); their "
        "dtypes may differ. spec: {threshold, scale, tol_abs, tol_rel, nan_equal, sens "
        "(optional)}, doubles as floats or 'nan'/'inf'/'-inf'. sensitivity: y's per-element "
        "rounding sensitivity s, the same kind of tuple (or None): element i's budget is "
        "max(tol_abs + tol_rel * |y_i|, sens * s_i). Returns {figures: {max_abs, max_rel, "
        "normwise_rel, worst_elem_ratio, budget_ratio, numel, elements_over, "
        "nonfinite_mismatches, scale}, worst, first_nonfinite_mismatch, x_at_worst, y_at_worst, "
        "s_at_worst, x_at_first_nonfinite, y_at_first_nonfinite}, non-finite doubles as those "
        "strings.");

  m.def("describe_output", &DescribeOutputBinding, "reference"_a, "truth"_a, "stream"_a = 0,
        "sensitivity"_a = nb::none(), "policy"_a = "",
        "The baseline of one reference output: reference and truth are (ptr, dtype, shape, "
        "device); the same pointer means there is no float64 run (truth_is_reference). Returns "
        "{dtype, shape, truth_dtype, truth_is_reference, truth_scale, reference_scale, "
        "vs_truth: a measure() result or None, vs_budget: the reference against its "
        "candidates' elementwise budget under `policy` (check::Policy JSON; with the truth's "
        "`sensitivity` (ptr, dtype, numel, device) where there is one), or None}.");

  m.def("finite_rms", &FiniteRmsBinding, "t"_a, "threshold"_a, "stream"_a = 0,
        "RMS of the values of t = (ptr, dtype, numel, device) whose magnitude stays below "
        "threshold (a float or 'inf').");

  m.def("checksums", &ChecksumsBinding, "buffers"_a, "device"_a, "key"_a, "stream"_a = 0,
        "The checksums of (ptr, nbytes) buffers of one device, each as checksum() gives it; on a "
        "GPU one wait for them all.");
  m.def("checksum", &ChecksumBinding, "ptr"_a, "nbytes"_a, "device"_a, "key"_a, "stream"_a = 0,
        "Keyed 64-bit checksum of nbytes at ptr (device -1: host memory): any change of any byte "
        "changes it, and without the key no change can be made that keeps it.");

  nb::class_<SharedArena>(
      m, "SharedArena",
      "One block of memory shared between processes through a file descriptor: a sealed memfd "
      "(device -1) or a CUDA VMM allocation (device >= 0), zeroed. view() gives DLPack tensors.")
      .def(nb::init<std::size_t, int>(), "nbytes"_a, "device"_a)
      .def_static("open", &SharedArena::Open, "fd"_a, "nbytes"_a, "device"_a,
                  "Import the arena behind fd (from export_fd, possibly of another process); "
                  "fd stays the caller's.")
      .def_prop_ro("ptr", &SharedArena::ptr)
      .def_prop_ro("nbytes", &SharedArena::nbytes)
      .def_prop_ro("capacity", &SharedArena::capacity)
      .def_prop_ro("device", &SharedArena::device)
      .def_prop_ro("revoked", &SharedArena::revoked)
      .def_prop_ro("closed", &SharedArena::closed)
      .def("export_fd", &SharedArena::ExportFd,
           "A new close-on-exec descriptor of the arena; the caller owns and closes it.")
      .def("view", &ArenaView, "offset"_a, "dtype"_a, "shape"_a,
           "A DLPack-capable array of dtype and shape at byte offset (bounds-checked, aligned to "
           "the element); it keeps the arena object alive. torch.from_dlpack(view) shares the "
           "memory.")
      .def("revoke", &SharedArena::Revoke,
           "Unmap now and keep the address range reserved until the process ends: any later "
           "access faults. Idempotent.")
      .def("close", &SharedArena::Close, "Release now (also done at destruction). Idempotent.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](SharedArena& self, nb::args) {
        self.Close();
        return false;
      });

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
