// The short human summary `kbv eval` prints: the verdict and reason first, then the few figures
// a person looks at (speedups with intervals, memory ratio, flags).
#pragma once

#include <string>

#include "core/result.hpp"

namespace kbv::report {

std::string summary(const Result& result);

}  // namespace kbv::report
