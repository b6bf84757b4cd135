#include "serve/reward.hpp"

namespace kbv::serve {

using nlohmann::json;

namespace {

json compact_speedup(const json& s) {
  if (!s.is_object() || !s.contains("value") || s["value"].is_null()) return nullptr;
  return {{"value", s["value"]},
          {"ci_low", s.value("ci_low", json())},
          {"ci_high", s.value("ci_high", json())},
          {"tie", s.value("tie", false)}};
}

}  // namespace

json reward_of(const json& result) {
  const std::string verdict = result.value("verdict", "");
  const json speedup = result.value("speedup", json::object());
  const std::string headline = speedup.is_object() ? speedup.value("headline", "vs_tf32") : "";
  json flags = {{"reject", json::array()}, {"warn", json::array()}};
  for (const auto& f : result.value("flags", json::array())) {
    const std::string severity = f.value("severity", "");
    if (severity == "reject" || severity == "warn") flags[severity].push_back(f.value("id", ""));
  }
  json memory_ratio = nullptr;
  if (result.contains("memory") && result["memory"].is_object()) {
    memory_ratio = result["memory"].value("peak_ratio", json());
  }
  return {{"verdict", verdict},
          {"correct", verdict == "correct"},
          {"hacked", verdict == "rejected"},
          {"harness_error", verdict == "harness_error"},
          {"speedup",
           speedup.is_object() ? compact_speedup(speedup.value(headline, json())) : json(nullptr)},
          {"speedup_fp32",
           speedup.is_object() ? compact_speedup(speedup.value("vs_fp32", json())) : json(nullptr)},
          {"memory_ratio", memory_ratio},
          {"flags", flags}};
}

}  // namespace kbv::serve
