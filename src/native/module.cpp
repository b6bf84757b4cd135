// kbv_native: the Python bindings. The worker imports torch first (so the CUDA runtime this module
// shares is torch's) and then this module.

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>

#include "native/cpu_timer.h"
#include "native/rss.h"

#if KBV_NATIVE_CUDA
#include "native/cuda_timer.h"
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

void ReleaseScratchBinding() {
#if KBV_NATIVE_CUDA
  ReleaseScratch();
#endif
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

  nb::class_<PeakRss>(m, "PeakRss",
                      "Context manager: the process's peak resident set size during the block.")
      .def(nb::init<bool>(), "use_hwm"_a = true)
      .def(
          "__enter__",
          [](PeakRss& self) -> PeakRss& {
            self.Enter();
            return self;
          },
          nb::rv_policy::reference)
      .def("__exit__",
           [](PeakRss& self, nb::args) {
             {
               // Joining the sampler can take a sampling period; nothing here needs Python.
               nb::gil_scoped_release no_gil;
               self.Exit();
             }
             return false;  // never swallow an exception raised in the block
           })
      .def_prop_ro("baseline_bytes", &PeakRss::baseline_bytes)
      .def_prop_ro("peak_bytes", &PeakRss::peak_bytes)
      .def_prop_ro("method", &PeakRss::method);
}
