#include "stats/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace kbv::stats {

nlohmann::json Profile::to_json() const {
  return {{"name", name},
          {"min_samples", min_samples},
          {"max_samples", max_samples},
          {"round_size", round_size},
          {"target_relative_half_width", target},
          {"budget_seconds", budget_seconds}};
}

Profile profile_by_name(const std::string& name) {
  if (name == "quick") return {"quick", 5, 50, 5, 0.02, 5};
  if (name == "standard") return {"standard", 20, 300, 10, 0.005, 20};
  if (name == "precise") return {"precise", 60, 2000, 20, 0.0025, 120};
  throw std::invalid_argument("unknown timing profile '" + name +
                              "' (known: quick, standard, precise)");
}

double relative_half_width(const Summary& s) {
  if (s.n == 0 || s.median <= 0) return INFINITY;
  return (s.ci_high - s.ci_low) / 2.0 / s.median;
}

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::Continue:
      return "continue";
    case StopReason::Precise:
      return "precise";
    case StopReason::MaxSamples:
      return "max_samples";
    case StopReason::Budget:
      return "budget";
  }
  return "unknown";
}

StopReason should_stop(const Profile& profile, const std::vector<std::span<const double>>& sides,
                       double elapsed_seconds) {
  size_t fewest = sides.empty() ? 0 : sides.front().size();
  for (const auto& side : sides) fewest = std::min(fewest, side.size());
  if (fewest >= static_cast<size_t>(profile.max_samples)) return StopReason::MaxSamples;
  if (fewest >= static_cast<size_t>(profile.min_samples)) {
    bool precise = std::all_of(sides.begin(), sides.end(), [&](std::span<const double> side) {
      return relative_half_width(summarize(side)) <= profile.target;
    });
    if (precise) return StopReason::Precise;
  }
  if (elapsed_seconds >= profile.budget_seconds) return StopReason::Budget;
  return StopReason::Continue;
}

double relative_half_width(const Ratio& r) {
  if (r.value <= 0) return INFINITY;
  return (r.ci_high - r.ci_low) / 2.0 / r.value;
}

StopReason should_stop_speedup(const Profile& profile, std::span<const double> candidate,
                               const std::vector<std::span<const double>>& baselines,
                               double elapsed_seconds) {
  size_t fewest = candidate.size();
  for (const auto& side : baselines) fewest = std::min(fewest, side.size());
  if (fewest >= static_cast<size_t>(profile.max_samples)) return StopReason::MaxSamples;
  if (fewest >= static_cast<size_t>(profile.min_samples) && !baselines.empty()) {
    // A cheaper bootstrap than the reported one: the rule only needs the width to a few percent.
    bool precise = std::all_of(baselines.begin(), baselines.end(), [&](auto baseline) {
      return relative_half_width(speedup(baseline, candidate, 0.02, 0.95, 500)) <= profile.target;
    });
    if (precise) return StopReason::Precise;
  }
  if (elapsed_seconds >= profile.budget_seconds) return StopReason::Budget;
  return StopReason::Continue;
}

bool warmup_steady(std::span<const double> medians, double tolerance) {
  if (medians.size() < 2) return false;
  double last = medians[medians.size() - 1], before = medians[medians.size() - 2];
  if (before <= 0) return last <= 0;
  return std::abs(last - before) / before <= tolerance;
}

std::vector<int> round_order(int sides, int round) {
  std::vector<int> order(static_cast<size_t>(std::max(0, sides)));
  std::iota(order.begin(), order.end(), 0);
  if (round % 2 == 1) std::reverse(order.begin(), order.end());
  return order;
}

}  // namespace kbv::stats
