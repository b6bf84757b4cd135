// Stored results in the shapes other tools read: JSON Lines (one `kbv eval` result per line)
// and KernelBench's eval_results.json, so existing analysis scripts keep working.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kbv::report {

// Every stored result as it is, harness errors included (their verdict says what they are).
std::string json_lines(const std::vector<nlohmann::json>& results);

// One eval_results.json per (run, level): "<run>/level_<L>/eval_results.json" ->
// {"<problem_id>": [{sample_id, compiled, correctness, metadata, runtime, runtime_stats}]},
// KernelBench's own shape. `runtime` is kbv's headline (the candidate's median, ms), -1 when
// not timed; `metadata` carries the kbv verdict, reason, flags and both speedups. Harness errors
// (faults of kbv, not verdicts) are left out: KernelBench's scripts would count them as failures.
std::map<std::string, nlohmann::json> kernelbench_files(const std::vector<nlohmann::json>& results);

}  // namespace kbv::report
