#pragma once

// Statistics for timing samples: a median with a distribution-free confidence interval (GPU
// timings are skewed and multi-modal, so no normality is assumed), and a bootstrap interval for
// the speedup so that differences inside the noise are reported as ties, not wins.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

namespace kbv::stats {

struct Summary {
  size_t n = 0;
  double median = 0, ci_low = 0, ci_high = 0, mean = 0, stdev = 0, min = 0, max = 0;
  double confidence = 0.95;
  // Keys carry the unit: {"median_ms": ..., "ci_low_ms": ..., "n": ..., "confidence": ...}.
  nlohmann::json to_json(std::string_view unit_suffix = "_ms") const;
};

// The confidence interval of the median is [x_(k), x_(n+1-k)] from the order statistics, with k
// the largest rank whose binomial(n, 1/2) coverage reaches `confidence` (exact up to n = 1000, the
// normal approximation above). Below n = 6 no pair of ranks reaches 95%, so the interval is
// [min, max], the widest the data allow. n == 0: all zero; n == 1: [x, x]. stdev is the sample
// (n - 1) standard deviation.
Summary summarize(std::span<const double> samples, double confidence = 0.95);

struct Ratio {
  double value = 0, ci_low = 0, ci_high = 0;
  bool tie = false;
  nlohmann::json to_json() const;
};

// speedup = median(baseline) / median(candidate), with a percentile-bootstrap interval
// (independent resampling of both sample sets, deterministic given `seed` on every platform);
// a tie when the interval contains 1.0 or |value - 1| <= tie_band. Either set empty, or a
// non-positive candidate median: all zero, not a tie.
Ratio speedup(std::span<const double> baseline, std::span<const double> candidate,
              double tie_band = 0.02, double confidence = 0.95, int resamples = 2000,
              uint64_t seed = 0x6b6276);

}  // namespace kbv::stats
