// `kbv generate`: prompts a model for candidates to every problem of a suite, N samples each, and
// writes them in KernelBench's generation layout, which `kbv run` pairs with the problems
// (schedule/discovery.hpp):
//   OUT/level_<L>_problem_<P>_sample_<S>_kernel.py   the code block taken from the answer, or a
//                                                     stub that fails at import (no code block)
//   OUT/generations.jsonl                             one row per request (generate/ledger.hpp)
// A rerun asks only for the samples without a final row. docs/generate.md has the whole story.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "generate/ledger.hpp"
#include "generate/scheduler.hpp"

namespace kbv::generate {

struct GenerateRequest {
  std::filesystem::path problems, out;
  std::string api = "openai", base_url, model;
  std::string key;  // from the environment only; never printed or written
  int samples = 1, concurrency = 4, max_tokens = 8192;
  std::optional<double> temperature;
  std::string prompt = "one-shot", hardware;
  double rpm = 0;  // requests per minute over the run; 0: no cap
  RetryPolicy retry;
  std::vector<int> levels;  // empty: every level
  // Only problems whose "levelL/name" contains one of these (empty: every problem).
  std::vector<std::string> filters;
  std::function<void(const std::string&)> progress;  // status lines; none when unset
  bool status_line = false;                          // progress rewrites one line (a terminal)
};

struct GenerateSummary {
  int problems = 0, skipped_problems = 0;
  int planned = 0;       // samples the run is for
  int already_done = 0;  // final rows found on start
  int restored = 0;      // of those, files written again from their row (the file was missing)
  int generated = 0;     // answered now (every outcome below)
  std::map<std::string, int> outcomes;
  int failed =
      0;  // requests never answered usably: no row of a final outcome, asked again next run
  bool stopped_on_auth = false;
  std::string fatal;  // kbv's own failure that stopped the run (e.g. a full disk); empty if none
  std::vector<std::string> failures;  // "level_1_problem_3_sample_0: why"
  std::vector<std::string> skipped;   // problems that cannot be written in KernelBench's layout
};

// Throws std::runtime_error for what makes the run impossible (no problems, a template missing,
// the output holding another model's generations).
GenerateSummary generate(const GenerateRequest& request);

// KernelBench's file name for a sample.
std::string kernel_file_name(const SampleKey& key);

// The candidate written for a sample without code: an import that fails with the reason, so kbv
// run records it as compile_error and every report counts it as a failed sample.
std::string failed_sample_stub(const SampleKey& key, const std::string& outcome);

// Every occurrence of `secret` replaced with "[redacted]" (a server may echo the key in an
// error). An empty secret leaves the text as it is.
std::string redact(std::string text, const std::string& secret);

}  // namespace kbv::generate
