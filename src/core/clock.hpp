// The one wall-clock helper of the engine: seconds elapsed on the steady clock.
#pragma once

#include <chrono>

namespace kbv {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace kbv
