// The timing loop of one evaluation: warm-up to steady clocks, ABBA-interleaved rounds between
// the candidate and the two baselines until the speedup is known to the profile's precision (or
// a sample or time budget runs out), then the secondary figures (host-inclusive and hot
// back-to-back times) and, on CUDA, the kernel-activity audit. The workers are reached through a
// callback, so the loop is the same for every device and unit-testable without one.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "stats/sampling.hpp"

namespace kbv::eval {

struct TimingPlan {
  stats::Profile profile;
  // false: a fixed number of rounds (explicit --samples or --rounds), no stopping rule.
  bool adaptive = true;
  int rounds = 0;     // fixed plan: rounds; adaptive: unused
  int per_round = 0;  // calls per side per round
  int secondary_calls = 0;
  int audit_calls = 0;  // kernel-activity audit calls per audited side (0: none)
  nlohmann::json to_json() const;
};

// The plan for `kbv eval --profile NAME [--samples N] [--rounds R]` (0: not given). Explicit
// samples or rounds give a fixed plan of the old form (defaults 60 samples in 6 rounds on CUDA,
// 15 in 3 on the CPU); otherwise the profile's adaptive plan. Throws std::invalid_argument for an
// unknown profile.
TimingPlan plan_timing(const std::string& profile, int samples, int rounds, bool cuda);

// One request to one side's worker: `who` is "tf32", "cand" or "fp32"; the request's "cmd" is
// "time", "time_secondary" or "kernel_audit". Returns the worker's result, or nullopt when the
// call failed (the caller has already recorded why; the loop then stops).
using SideCall =
    std::function<std::optional<nlohmann::json>(const std::string& who, const nlohmann::json&)>;

struct TimingRun {
  bool ok = false;
  std::map<std::string, std::vector<double>> samples;  // headline samples by side ("cand", ...)
  nlohmann::json timing;                               // the result's `timing` object
};

// The sides, in the forward order of a round (round_order reverses it on odd rounds).
const std::vector<std::string>& timing_sides();
// The result key of a side: "candidate", "baseline_tf32", "baseline_fp32".
std::string side_key(const std::string& who);

// Runs the plan. `now_seconds` is a clock for the time budget (default: the steady clock).
TimingRun run_timing(const TimingPlan& plan, const SideCall& call, bool cuda,
                     const std::function<void(const std::string&)>& progress = {},
                     std::function<double()> now_seconds = {});

// Merges the per-request throttle reports of one side (the worker's `throttle` objects) into the
// side's summary: samples kept and discarded, power-capped samples, reason counts, SM clock range.
nlohmann::json merge_throttle(const std::vector<nlohmann::json>& reports);

}  // namespace kbv::eval
