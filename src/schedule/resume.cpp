#include "schedule/resume.hpp"

namespace kbv::schedule {

bool evaluate_again(const nlohmann::json& stored, const eval::EvalLimits& now) {
  if (!stored.is_object()) return false;
  if (stored.value("verdict", "") == "harness_error") return true;
  if (stored.value("verdict", "") != "timeout") return false;
  const auto limits = stored.value("limits", nlohmann::json::object());
  if (!limits.contains("compile_timeout_s") || !limits.contains("call_timeout_s")) return false;
  return now.compile_timeout.count() > limits["compile_timeout_s"].get<long long>() ||
         now.call_timeout.count() > limits["call_timeout_s"].get<long long>();
}

}  // namespace kbv::schedule
