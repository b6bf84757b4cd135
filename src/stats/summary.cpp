#include "stats/summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "stats/rng.hpp"

namespace kbv::stats {

namespace {

// Above this many samples the binomial coverage is taken from the normal approximation; at
// n = 1000 both give the same ranks.
constexpr size_t kExactBinomialLimit = 1000;

void check_confidence(double confidence) {
  if (!(confidence > 0 && confidence < 1)) {
    throw std::invalid_argument(fmt::format("confidence {} is not in (0, 1)", confidence));
  }
}

// Upper alpha/2 quantile of the standard normal, by bisection on erfc (monotone, so bisection is
// exact to the last bits and needs no tables).
double normal_quantile_two_sided(double confidence) {
  const double tail = (1 - confidence) / 2;
  double lo = 0, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The largest 1-based rank k with P(B <= k - 1) <= (1 - confidence) / 2 for B ~ binomial(n, 1/2),
// so that [x_(k), x_(n+1-k)] covers the median with at least `confidence`; 0 when even
// [x_(1), x_(n)] falls short.
size_t median_ci_rank(size_t n, double confidence) {
  const double tail = (1 - confidence) / 2;
  if (n > kExactBinomialLimit) {
    // With the continuity correction: (k - 1 + 0.5 - n/2) / (sqrt(n)/2) <= -z.
    const double z = normal_quantile_two_sided(confidence);
    const double k = std::floor(n / 2.0 - z * std::sqrt(double(n)) / 2 + 0.5);
    return k < 1 ? 0 : static_cast<size_t>(k);
  }
  const double log_half_n = -double(n) * std::log(2.0);
  const double log_n_factorial = std::lgamma(double(n) + 1);
  double cdf = 0;
  size_t rank = 0;
  for (size_t j = 0; j <= n / 2; ++j) {
    cdf += std::exp(log_n_factorial - std::lgamma(double(j) + 1) - std::lgamma(double(n - j) + 1) +
                    log_half_n);
    if (cdf > tail * (1 + 1e-12)) break;  // the slack absorbs rounding at exact boundaries
    rank = j + 1;
  }
  return rank;
}

double median_of_sorted(std::span<const double> sorted) {
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

// Median in place (reorders `xs`), O(n).
double median_in_place(std::span<double> xs) {
  const size_t n = xs.size();
  const auto upper = xs.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(xs.begin(), upper, xs.end());
  if (n % 2 == 1) return *upper;
  return (*std::max_element(xs.begin(), upper) + *upper) / 2;
}

// Linear interpolation between order statistics (numpy's default percentile) of sorted data.
double quantile_of_sorted(std::span<const double> sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - double(i)) * (sorted[i + 1] - sorted[i]);
}

double resampled_median(std::span<const double> xs, Rng& rng, std::vector<double>& scratch) {
  scratch.resize(xs.size());
  for (double& v : scratch) v = xs[rng.below(xs.size())];
  return median_in_place(scratch);
}

double median_of(std::span<const double> xs) {
  std::vector<double> copy(xs.begin(), xs.end());
  return median_in_place(copy);
}

}  // namespace

Summary summarize(std::span<const double> samples, double confidence) {
  check_confidence(confidence);
  Summary s;
  s.confidence = confidence;
  s.n = samples.size();
  if (s.n == 0) return s;

  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = median_of_sorted(sorted);
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / double(s.n);
  if (s.n > 1) {
    double squares = 0;
    for (const double x : sorted) squares += (x - s.mean) * (x - s.mean);
    s.stdev = std::sqrt(squares / double(s.n - 1));
  }
  const size_t k = std::max<size_t>(median_ci_rank(s.n, confidence), 1);
  s.ci_low = sorted[k - 1];
  s.ci_high = sorted[s.n - k];
  return s;
}

Ratio speedup(std::span<const double> baseline, std::span<const double> candidate, double tie_band,
              double confidence, int resamples, uint64_t seed) {
  check_confidence(confidence);
  Ratio r;
  if (baseline.empty() || candidate.empty()) return r;
  const double candidate_median = median_of(candidate);
  if (!(candidate_median > 0)) return r;
  r.value = median_of(baseline) / candidate_median;
  r.ci_low = r.ci_high = r.value;

  if (resamples > 0) {
    Rng rng(seed);
    std::vector<double> ratios(static_cast<size_t>(resamples)), scratch;
    for (double& ratio : ratios) {
      const double b = resampled_median(baseline, rng, scratch);
      ratio = b / resampled_median(candidate, rng, scratch);
    }
    std::sort(ratios.begin(), ratios.end());
    const double tail = (1 - confidence) / 2;
    r.ci_low = quantile_of_sorted(ratios, tail);
    r.ci_high = quantile_of_sorted(ratios, 1 - tail);
  }
  r.tie = (r.ci_low <= 1 && 1 <= r.ci_high) || std::abs(r.value - 1) <= tie_band;
  return r;
}

nlohmann::json Summary::to_json(std::string_view unit_suffix) const {
  const auto key = [&](std::string_view name) {
    return std::string(name) + std::string(unit_suffix);
  };
  return {{"n", n},
          {key("median"), median},
          {key("ci_low"), ci_low},
          {key("ci_high"), ci_high},
          {key("mean"), mean},
          {key("stdev"), stdev},
          {key("min"), min},
          {key("max"), max},
          {"confidence", confidence}};
}

nlohmann::json Ratio::to_json() const {
  return {{"value", value}, {"ci_low", ci_low}, {"ci_high", ci_high}, {"tie", tie}};
}

}  // namespace kbv::stats
