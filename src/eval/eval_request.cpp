#include "eval/eval_request.hpp"

#include "core/result.hpp"

namespace kbv::eval {

nlohmann::json EvalSettings::key() const {
  nlohmann::json key = {{"protocol", protocol},
                        {"device", cuda() ? "cuda" : "cpu"},
                        {"size", size},
                        {"draws", hidden_draws},
                        {"timing_profile", timing_profile},
                        {"samples", timing_samples},
                        {"rounds", timing_rounds},
                        {"measure", measure},
                        {"kbv", std::string(kVersion)}};
  // Keyed apart only when off, so the keys of sandboxed results (every earlier database's) hold.
  if (!sandbox) key["sandbox"] = false;
  if (audit) key["audit"] = true;
  if (allow_library) key["allow_library"] = true;  // keyed apart only when on, like audit
  return key;
}

nlohmann::json EvalLimits::to_json() const {
  nlohmann::json limits = {{"compile_timeout_s", compile_timeout.count()},
                           {"call_timeout_s", call_timeout.count()},
                           {"max_scratch_bytes", max_scratch_bytes},
                           {"max_host_memory_bytes", max_host_memory_bytes}};
  if (reference_address_space_bytes > 0) {
    limits["reference_address_space_bytes"] = reference_address_space_bytes;
  }
  return limits;
}

}  // namespace kbv::eval
