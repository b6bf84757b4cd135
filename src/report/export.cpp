#include "report/export.hpp"

#include <fmt/format.h>

#include "report/metrics.hpp"

namespace kbv::report {

using nlohmann::json;

std::string json_lines(const std::vector<json>& results) {
  std::string out;
  for (const auto& r : results) out += r.dump() + "\n";
  return out;
}

std::map<std::string, json> kernelbench_files(const std::vector<json>& results) {
  std::map<std::string, json> files;
  for (const auto& r : results) {
    // KernelBench's files are figures (compiled, correctness): a fault of kbv is in none.
    if (is_harness_error(r)) continue;
    const auto& row = r["_row"];
    std::string level = row["level"].is_number() ? std::to_string(row["level"].get<int>()) : "0";
    std::string problem_id = row["problem_id"].is_number()
                                 ? std::to_string(row["problem_id"].get<int>())
                                 : row["problem"].get<std::string>();
    auto file = fmt::format("{}/level_{}/eval_results.json", row["run"].get<std::string>(), level);
    std::string verdict = r["verdict"];
    json timing = r.value("timing", json());
    json candidate = timing.is_object() ? timing["candidate"] : json();
    json entry = {{"sample_id", row["sample"].is_number() ? row["sample"].get<int>() : 0},
                  {"compiled", verdict != "compile_error"},
                  {"correctness", verdict == "correct"},
                  {"metadata",
                   {{"kbv_verdict", verdict},
                    {"kbv_reason", r["reason"]},
                    {"kbv_flags", r["flags"]},
                    {"speedup_vs_tf32", r["speedup"].value("vs_tf32", json())},
                    {"speedup_vs_fp32", r["speedup"].value("vs_fp32", json())},
                    {"hardware", r["environment"].value("device_name", std::string())},
                    {"device", r["environment"].value("device", std::string())},
                    {"protocol", r["protocol"].value("name", std::string())}}},
                  {"runtime", candidate.is_object() ? candidate.value("median_ms", -1.0) : -1.0},
                  {"runtime_stats",
                   candidate.is_object()
                       ? json{{"mean", candidate.value("mean_ms", 0.0)},
                              {"std", candidate.value("stdev_ms", 0.0)},
                              {"min", candidate.value("min_ms", 0.0)},
                              {"max", candidate.value("max_ms", 0.0)},
                              {"median", candidate.value("median_ms", 0.0)},
                              {"num_trials", candidate.value("n", 0)},
                              {"hardware", r["environment"].value("device_name", std::string())}}
                       : json::object()}};
    files[file][problem_id].push_back(entry);
  }
  return files;
}

}  // namespace kbv::report
