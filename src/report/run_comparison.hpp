// `kbv compare A.sqlite B.sqlite`: the same figures for two sets of results side by side, with
// the difference B - A, group by group (matched by protocol and group key), and the verdicts of
// the candidates both hold (matched by protocol, run, level, problem and sample). Two databases
// of one protocol each, different (the same candidates under standard and under verified), are
// paired across the protocols instead (Comparison::protocol_a). A problem
// flagged in either database (metrics.hpp, FlaggedProblems) is left out of both sides' figures
// and of the matched candidates unless options.include_flagged, so that both sides are over the
// same problems; its own figures are groups of group_by `flagged_problem`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/metrics.hpp"
#include "report/render.hpp"

namespace kbv::report {

struct FigureDiff {
  std::string name;                  // as in scalars()
  std::optional<double> a, b, diff;  // diff = b - a when both are set
};

struct GroupDiff {
  std::string protocol, group_by, key;  // group_by: "overall", "run", "level", "flagged_problem"
  std::string variant;                  // "all" or "best_of_n"
  bool in_a = false, in_b = false;      // a side without the group has every figure unset
  std::vector<FigureDiff> figures;
  nlohmann::json to_json() const;
};

struct Comparison {
  std::string label_a, label_b;
  // Set when each side holds one protocol and they differ (standard.sqlite against
  // verified.sqlite): groups and candidates are then paired across the protocols, and each
  // group's `protocol` reads "standard vs verified". Empty otherwise (pairing by protocol).
  std::string protocol_a, protocol_b;
  Options options;
  std::vector<GroupDiff> groups;
  FlaggedProblems flagged;  // problems flagged in either database, with results in either
  int matched = 0;          // candidates in both (of flagged problems only with include_flagged)
  int matched_flagged = 0;  // candidates in both of flagged problems
  int same_verdict = 0;     // of those, same verdict on both sides
  int correct_only_in_a = 0, correct_only_in_b = 0;
  // Harness errors of each side: in no figure and matched with nothing; counted and listed.
  std::vector<HarnessErrorRow> harness_errors_a, harness_errors_b;
  nlohmann::json to_json() const;
};

Comparison compare(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                   const Options& options = {}, std::string label_a = "A",
                   std::string label_b = "B");

// Markdown and HTML list the overall group and the `by` groups; CSV (long: one row per group
// and figure) and JSON hold every group.
std::string render(const Comparison& comparison, Format format, GroupBy by = GroupBy::Run);

}  // namespace kbv::report
