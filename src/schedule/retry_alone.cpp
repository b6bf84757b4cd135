#include "schedule/retry_alone.hpp"

#include <fmt/format.h>

#include "judge/stage_failure.hpp"

namespace kbv::schedule {

bool needs_retry_alone(const Result& result, int evaluations_on_device, bool draws_ahead_beside) {
  const bool reference_memory = result.verdict == Verdict::HarnessError && result.harness_fault &&
                                result.harness_fault->kind == FaultKind::OutOfMemory;
  // A correct candidate timed with a library plan chosen for want of device memory: the memory
  // others held may have cost it the plan its code gets with room (its speedup, not its verdict).
  const bool squeezed_plans =
      result.verdict == Verdict::Correct && result.has_flag("plans_under_pressure");
  if (evaluations_on_device <= 1) {
    return draws_ahead_beside && (reference_memory || squeezed_plans);
  }
  if (squeezed_plans) return true;
  return result.verdict == Verdict::RuntimeError || result.verdict == Verdict::Timeout ||
         reference_memory;
}

bool draws_ahead_beside(const std::string& device) { return device.rfind("cuda", 0) == 0; }

std::string first_attempt(const Result& result) {
  return fmt::format("{}: {}", to_string(result.verdict), judge::first_line(result.reason));
}

void place_alone(eval::EvalRequest& request) {
  request.placement.gate = nullptr;
  request.placement.evaluations_per_device = 1;
  request.placement.sessions_ahead = false;  // the threads let theirs go
  // Nothing starts beside it: no spare reference worker importing torch while it is timed.
  request.placement.spare_reference = false;
}

void mark_evaluated_alone(Result& result, const std::string& first_attempt) {
  result.add_flag("evaluated_alone", Severity::Info,
                  fmt::format("with the device shared the first attempt ended {}; this verdict "
                              "is from a second attempt once the evaluations beside it had "
                              "finished, with the device and its memory to itself",
                              first_attempt));
}

}  // namespace kbv::schedule
