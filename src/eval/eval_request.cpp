#include "eval/eval_request.hpp"

#include "core/result.hpp"
#include "eval/protocol.hpp"

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
  // The version of the protocol's rules: a result judged by older rules is evaluated again on
  // resume rather than mixed into a run under newer ones. Keyed from version 2 on, so that
  // version 1 keys (the standard and kbv-paper protocols') hold.
  try {
    if (const int version = protocol_by_name(protocol, hidden_draws).version; version > 1) {
      key["protocol_version"] = version;
    }
  } catch (const std::invalid_argument&) {
    // An unknown protocol is reported where it is used; its key needs no version.
  }
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
