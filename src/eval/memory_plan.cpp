#include "eval/memory_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kbv::eval {

nlohmann::json MemoryPlan::to_json() const {
  return {{"cache_bytes", cache_bytes},
          {"cached_cases", cached_cases},
          {"timing_sets", timing_sets},
          {"working_bytes", working_bytes},
          {"sensitivity_bytes", sensitivity_bytes},
          {"alone", alone},
          {"fits", fits}};
}

MemoryPlan plan_memory(const MemoryFacts& f) {
  MemoryPlan plan;
  const int evaluations = std::max(1, f.evaluations_per_device);
  // On the host the budget comes from what is free (other programs use the machine); on a GPU
  // from the device's size (the reference's own context and model are already in `free`).
  const double pool = f.device ? f.total_bytes : f.free_bytes;
  const double cases_share = f.device && f.sessions_ahead ? kCacheShare - kAheadShare : kCacheShare;
  const double share = pool * cases_share / evaluations;
  const double case_bytes = std::max(1.0, f.case_bytes);
  plan.cached_cases = std::clamp(static_cast<int>(std::floor(share / case_bytes)), 0, f.cases);
  plan.cache_bytes = plan.cached_cases * case_bytes;
  // A timing set is a case's inputs kept (already counted when the case is cached) and its
  // golden outputs under the initial state.
  const double timing_set_bytes = case_bytes + f.judged_bytes;
  plan.timing_sets = std::clamp(static_cast<int>(std::floor(share / timing_set_bytes)), 1,
                                std::max(1, f.timing_sets_wanted));
  // What one evaluation holds at its peak: the reference drawing a case (its peak includes the
  // case it keeps), and the candidate's process beside it: a case's worth (the slot, the
  // outputs it judges), its own model, and what its allocator keeps cached after a forward as
  // large as the reference's (an attention problem's 8 GB of scores, not only its outputs).
  plan.working_bytes = f.draw_peak_bytes + case_bytes +
                       std::max(f.output_bytes, f.forward_peak_bytes) + f.model_bytes;
  plan.sensitivity_bytes = std::max(0.0, f.sensitivity_peak_bytes - f.draw_peak_bytes);
  plan.alone = f.device && evaluations > 1 && plan.working_bytes > f.total_bytes * kReservableShare;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (plan.cached_cases >= f.cases) {
    plan.fits = fmt::format("all {} cases resident ({:.2f} GiB each)", f.cases, case_bytes / gib);
  } else if (plan.cached_cases > 0) {
    plan.fits = fmt::format("{} of {} cases resident ({:.2f} GiB each), the rest drawn again",
                            plan.cached_cases, f.cases, case_bytes / gib);
  } else {
    plan.fits =
        fmt::format("one case at a time ({:.2f} GiB each), each drawn when used", case_bytes / gib);
  }
  if (plan.timing_sets < f.timing_sets_wanted) {
    plan.fits +=
        fmt::format("; {} timing set{}", plan.timing_sets, plan.timing_sets == 1 ? "" : "s");
  }
  if (plan.alone) {
    plan.fits += "; the device's memory to itself";
  } else if (f.device && evaluations > 1 && plan.working_bytes >= gib) {
    plan.fits += fmt::format("; {:.0f} GiB of the device reserved", plan.working_bytes / gib);
  }
  if (f.device && evaluations > 1 && plan.sensitivity_bytes >= gib) {
    plan.fits += fmt::format(" (+{:.0f} GiB for the sensitivity's runs, when needed)",
                             plan.sensitivity_bytes / gib);
  }
  return plan;
}

double working_bytes_before_drawing(const ProblemSizes& sizes) {
  const double state = kStateWorkingFactor * sizes.state_bytes;
  if (sizes.forward_peak_bytes <= 0) return kWorkingFactor * sizes.input_bytes + state;
  return kInputWorkingFactor * sizes.input_bytes +
         kForwardPeakWorkingFactor * sizes.forward_peak_bytes +
         kOutputWorkingFactor * sizes.output_bytes + state;
}

bool needs_device_alone(const ProblemSizes& sizes, double device_bytes,
                        int evaluations_per_device) {
  if (evaluations_per_device <= 1 || device_bytes <= 0) return false;
  return working_bytes_before_drawing(sizes) > device_bytes / evaluations_per_device;
}

bool needs_whole_ledger(const ProblemSizes& sizes, double device_bytes) {
  if (device_bytes <= 0) return false;
  return working_bytes_before_drawing(sizes) >= device_bytes * kReservableShare;
}

}  // namespace kbv::eval
