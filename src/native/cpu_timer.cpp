#include "native/cpu_timer.h"

#include <stdexcept>

#include "native/integrity.h"

namespace nb = nanobind;

namespace kbv::native {

std::vector<double> TimeCpu(const nb::callable& fn, int calls, int warmup) {
  if (calls < 0 || warmup < 0) {
    throw std::invalid_argument("time_cpu: calls and warmup must be non-negative");
  }
  // The index keeps counting through the timed calls: the worker picks the input set with it, and
  // a timed call must not reuse the inputs a warm-up call just pulled into the caches.
  for (int i = 0; i < warmup; ++i) fn(i);

  std::vector<double> samples_ms;
  samples_ms.reserve(static_cast<std::size_t>(calls));
  // The kernel's monotonic clock, asked here: no GOT slot, libc or vDSO code between the call
  // and the clock for the timed code to redirect (native/integrity.h).
  for (int k = 0; k < calls; ++k) {
    const std::int64_t start = KernelMonotonicNs();
    // The result stays alive until the clock is read: freeing the outputs is not the call's cost.
    nb::object result = fn(warmup + k);
    const std::int64_t end = KernelMonotonicNs();
    samples_ms.push_back(static_cast<double>(end - start) / 1e6);
  }
  IntegrityNote();  // anything below Python the calls rewrote: reported with the samples
  return samples_ms;
}

}  // namespace kbv::native
