// `kbv report`'s figures: pure functions from stored results (`Store::results()`, each a
// `kbv.result/1` JSON with its `_row`) to a Report, grouped by protocol, then run, level and
// overall. Every figure's definition, with its denominator, is in docs/reporting.md; a figure
// with nothing to average is unset (null in JSON), never NaN.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kbv::report {

struct Options {
  // A correct kernel "raises peak memory" when candidate peak / reference peak exceeds this.
  double memory_noise_band = 1.05;
  double confidence = 0.95;  // of the bootstrap intervals
  int resamples = 2000;      // bootstrap resamples (0: no interval, [value, value])
  uint64_t seed = 0x6b6276;  // the bootstrap's splitmix64 seed: same input, same intervals
  std::vector<double> fast_p = {0, 0.5, 0.8, 1, 1.5, 2};
  // Problems flagged degenerate or with a reference failing its float64 run are left out of
  // every aggregate (and listed with their own figures) unless this is set: `--include-flagged`.
  bool include_flagged = false;
};

// A problem whose results say nothing about its kernels: its output does not depend on its inputs
// (`problem.degenerate`, flag `problem_degenerate`) or its TF32 reference is far from its own
// float64 run (flag `reference_fails_float64`, `problem.audit.reference_fails_float64`). The flags
// are about the problem, so one result carrying them flags the problem for every candidate, run
// and protocol. Keyed like the task rows' problems, "levelL/name"
// ("level2/80_Gemm_Max_Subtract_GELU")
// -> the flag ids that flag it, sorted.
using FlaggedProblems = std::map<std::string, std::vector<std::string>>;
// The problems the results flag (harness errors are not read).
FlaggedProblems flagged_problems(const std::vector<nlohmann::json>& results);

// A geometric mean over n values with its percentile-bootstrap interval; unset when n == 0.
struct Estimate {
  int n = 0;
  std::optional<double> value, ci_low, ci_high;
  nlohmann::json to_json() const;
};

// The speedup figures against one baseline (TF32 or FP32).
struct SpeedupFigures {
  std::vector<std::pair<double, int>> fast;  // p -> tasks correct with speedup > p
  int timed = 0;                             // correct results with this speedup measured
  int wins = 0, ties = 0, losses = 0;        // among `timed`, by the speedup's own interval
  Estimate geomean;                          // over the `timed` correct kernels
  Estimate geomean_failures_as_one;          // over every task; not-correct ones count as 1.0
};

struct Figures {
  int tasks = 0;
  std::map<std::string, int> verdicts;  // every verdict seen -> count
  int compiled = 0, correct = 0, incorrect = 0, rejected = 0;
  int native_ok = 0;                     // tasks whose native family passed every draw
  int hidden_tasks = 0;                  // tasks whose protocol has families besides the native one
  int hidden_ok = 0;                     // ... of which every such family passed every draw
  int caught_by_hidden = 0;              // native passed, a hidden family failed
  std::map<std::string, int> family_ok;  // family -> tasks passing it
  std::map<std::string, int> first_failing_family;  // over `incorrect`; "other" when none
  std::map<std::string, int> reject_flags;          // over `rejected`: flag id -> results
  SpeedupFigures vs_tf32, vs_fp32;
  int memory_measured = 0;     // correct kernels with both peaks measured (> 0)
  Estimate memory_efficiency;  // geomean of reference peak / candidate peak
  int memory_raised = 0;       // of `memory_measured`, peak_ratio > noise band
  std::optional<double> memory_raised_median_ratio;  // median peak_ratio among those
  nlohmann::json to_json() const;
};

// The figures as named scalars in a fixed order (rates as fractions, unset = undefined): the
// CSV's columns, the comparison's rows.
std::vector<std::pair<std::string, std::optional<double>>> scalars(const Figures& f);

struct Group {
  std::string key;  // the run, "level N" (or "level ?"), "all", or a flagged problem
  Figures figures;
  // Flagged problems with results in this group that its figures leave out (0 with
  // include_flagged, and in a flagged problem's own group).
  int flagged_left_out = 0;
  // Only when some (run, problem) in the group has several samples: one task per
  // (run, level, problem), the correct sample with the best speedup vs TF32 (memory from it).
  std::optional<Figures> best_of_n;
  nlohmann::json to_json() const;
};

// Every result of one protocol.
struct Section {
  std::string protocol;
  Group overall;
  std::vector<Group> by_run, by_level;
  // One group per flagged problem with results under this protocol (key "levelL/name"), in the
  // problems' order: its own figures, whether or not the groups above include it.
  std::vector<Group> flagged;
  nlohmann::json to_json() const;
};

// When the results hold several protocols: the figures over the candidates (run, level,
// problem, sample) evaluated under every one of them, side by side.
struct ProtocolComparison {
  std::vector<std::string> protocols;
  int common_candidates = 0;
  std::vector<Group> overall;                        // one per protocol, key = protocol
  std::map<std::string, std::vector<Group>> by_run;  // run -> one per protocol
  // (a, b) -> common candidates correct under a but not under b.
  std::map<std::pair<std::string, std::string>, int> correct_in_a_not_b;
  nlohmann::json to_json() const;
};

// One result, as the per-problem table shows it.
struct TaskRow {
  std::string run, protocol, problem, verdict, reason, candidate_path;
  std::optional<int> level, problem_id, sample;
  std::vector<std::string> flags;  // "severity:id"
  std::optional<double> speedup_tf32, speedup_fp32, peak_ratio;
  bool tie_tf32 = false;
  std::string first_failing_family;        // for incorrect results
  std::vector<std::string> problem_flags;  // why its problem is flagged; empty when it is not
  nlohmann::json to_json() const;
};

// A stored harness_error: a fault of kbv itself (docs/result.md), not a verdict on the candidate.
// It is in no figure and no table row; reports list it, with its reason, under the tables.
struct HarnessErrorRow {
  TaskRow task;      // verdict "harness_error", reason, and where it came from
  std::string kind;  // disk_full, reference_crashed, out_of_memory, channel, internal
  std::string stage;
  nlohmann::json to_json() const;
};

struct Report {
  Options options;
  int results = 0;                // every stored result, harness errors included
  std::vector<Section> sections;  // one per protocol, by name
  std::optional<ProtocolComparison> protocols;
  FlaggedProblems flagged;  // the flagged problems with results here (options.include_flagged)
  std::vector<std::string> degenerate_problems;               // "level1/19_ReLU"
  std::vector<std::string> reference_fails_float64_problems;  // same form
  std::vector<TaskRow> tasks;  // ordered by protocol, run, level, problem id, problem, sample
  std::vector<HarnessErrorRow> harness_errors;  // left out of everything above; same order
  nlohmann::json to_json() const;
};

// Harness errors (verdict `harness_error`) are left out of every figure, group, comparison and
// task row, and listed in `harness_errors`. Results of flagged problems are left out of every
// figure (sections' groups, the protocols side by side) unless options.include_flagged, and have
// their own groups (`Section::flagged`); their task rows stay, with `problem_flags`.
Report build_report(const std::vector<nlohmann::json>& results, const Options& options = {});
// The same with the flagged problems decided elsewhere (kbv compare: those of either side).
Report build_report(const std::vector<nlohmann::json>& results, const Options& options,
                    const FlaggedProblems& flagged);

// A stored result that is a fault of kbv rather than a verdict (exports leave it out too).
bool is_harness_error(const nlohmann::json& result);

// The geometric mean of positive values with a percentile-bootstrap interval (tasks resampled
// with replacement, deterministic given the seed); exposed for the tests.
Estimate geomean(const std::vector<double>& values, const Options& options);

// Families of a result in protocol order (protocol.families, else "native" first, then by
// name), the native one (`native`, else the first), and the first that failed.
std::vector<std::string> family_order(const nlohmann::json& result);
std::optional<std::string> first_failing_family(const nlohmann::json& result);

}  // namespace kbv::report
