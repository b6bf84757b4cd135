#include "native/cpu_timer.h"

#include <chrono>
#include <stdexcept>

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
  for (int k = 0; k < calls; ++k) {
    const auto start = std::chrono::steady_clock::now();
    // The result stays alive until the clock is read: freeing the outputs is not the call's cost.
    nb::object result = fn(warmup + k);
    const auto end = std::chrono::steady_clock::now();
    samples_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  return samples_ms;
}

}  // namespace kbv::native
