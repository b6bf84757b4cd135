// The result of evaluating one candidate against one problem: the verdict, its reason, the flags
// and every figure behind them. This is the JSON schema users and the store read
// (`kbv.result/1`); to_json() is its single definition.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kbv {

inline constexpr std::string_view kResultSchema = "kbv.result/1";
inline constexpr std::string_view kVersion = KBV_VERSION;

// HarnessError is not a verdict on the candidate: kbv itself failed (a full disk, a reference
// worker that crashed, its own memory, its channel, its own bug). Such a result is stored so a
// user sees it, left out of every figure, and evaluated again by a rerun (docs/result.md).
enum class Verdict {
  Correct,
  Incorrect,
  Rejected,
  CompileError,
  RuntimeError,
  Timeout,
  HarnessError
};
std::string_view to_string(Verdict verdict);

// What kind of fault of kbv ended an evaluation as harness_error (judge/harness_fault.hpp
// classifies them).
enum class FaultKind { DiskFull, ReferenceCrashed, OutOfMemory, Channel, Internal };
std::string_view to_string(FaultKind kind);

struct HarnessFault {
  FaultKind kind = FaultKind::Internal;
  std::string stage;   // what kbv was doing ("drawing the input families", "starting a worker")
  std::string detail;  // what failed, in the words of whoever saw it (errno text, exit status)
  std::string memory = {};  // out_of_memory reported by the reference: "device", "host" or
                            // "library_plan" (a plan chosen for want of room)
  nlohmann::json to_json() const;
  // One sentence for the result's reason: the kind, the stage, the detail's first line.
  std::string reason() const;
};

enum class Severity { Reject, Warn, Info };
std::string_view to_string(Severity severity);

// A finding about the candidate or the problem. Ids are stable snake_case names, each in the
// catalogue (core/flags.hpp, docs/result.md); `reject` flags decide the verdict `rejected`, the
// others never do.
struct Flag {
  std::string id;
  Severity severity = Severity::Info;
  std::string detail;
};

// The one rule of a flag list, for the result and the evaluation's findings alike: one flag per
// id, its first evidence kept; every id catalogued (core/flags.hpp) with a severity it may carry.
void add_flag(std::vector<Flag>& flags, std::string id, Severity severity, std::string detail);
bool has_flag(const std::vector<Flag>& flags, std::string_view id);
bool has_reject_flag(const std::vector<Flag>& flags);

// Correctness on one input family: every draw's figures, and the worst of them.
struct FamilyResult {
  std::string family;
  int draws = 0;
  int passed = 0;
  bool evaluated = false;  // false when evaluation stopped before this family
  double max_abs = 0, max_rel = 0, normwise_rel = 0;
  // The largest margins (error over budget, check::Outcome) of its cases' outputs: how close
  // the family came to failing (absent: no output judged by the scaled policy).
  std::optional<double> elem_margin, norm_margin;
  nlohmann::json cases = nlohmann::json::array();
  bool ok() const { return evaluated && passed == draws; }
};

struct Result {
  Verdict verdict = Verdict::RuntimeError;
  std::string reason;
  std::vector<Flag> flags;
  std::vector<FamilyResult> correctness;
  nlohmann::json timing = nullptr;  // candidate, baseline_tf32, baseline_fp32 summaries
  nlohmann::json speedup = {{"vs_tf32", nullptr}, {"vs_fp32", nullptr}};
  nlohmann::json memory = nullptr;
  nlohmann::json problem = nlohmann::json::object();
  nlohmann::json candidate = nlohmann::json::object();
  nlohmann::json protocol = nlohmann::json::object();
  nlohmann::json environment = nlohmann::json::object();
  nlohmann::json isolation = nlohmann::json::object();
  nlohmann::json durations_s = nlohmann::json::object();
  nlohmann::json limits = nlohmann::json::object();  // the bounds it ran under (EvalLimits)
  std::string error_detail;  // trimmed traceback or compiler output behind the reason
  std::optional<HarnessFault> harness_fault;  // with verdict HarnessError only

  void add_flag(std::string id, Severity severity, std::string detail);
  bool has_flag(std::string_view id) const;
  bool has_reject_flag() const;
  nlohmann::json to_json() const;
};

}  // namespace kbv
