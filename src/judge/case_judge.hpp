// One hidden case judged: first the structure of what the forward returned (count, type,
// storage shared with an input, inputs changed in place), then every output against the golden
// outputs under the protocol's policy. The golden outputs never leave the reference's worker
// (docs/case-path.md), so judging an output is two steps: plan the measurement pass from the
// case's baselines (check::plan_candidate_pass), which the reference runs where the tensors
// are, then decide from the figures it answers (check::decide). Pure: answers in, an outcome
// and flags out.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "check/compare.hpp"
#include "core/result.hpp"
#include "judge/findings.hpp"

namespace kbv::judge {

// The structure of a forward's answer on case `c` (the reference's description of the case):
// flags for outputs sharing an input's storage (where the reference's do not) and tensor
// subclasses; the reason when the structure itself is wrong (nullopt: fine).
std::optional<std::string> judge_structure(const nlohmann::json& c, const nlohmann::json& run,
                                           Findings& out);

// Inputs the forward changed in place (the reference's checksums of the shared inputs, before
// and after: `mutated` lists their positions): a reject.
void flag_mutated_inputs(const std::string& where, const nlohmann::json& mutated, Findings& out);

struct OutputsJudgement {
  bool passed = false;
  std::string reason;                                // the first failing output's
  nlohmann::json outputs = nlohmann::json::array();  // per output: figures, budgets, index
};

// One output of a forward on a case, planned: measured in the reference (`pass`), or failed
// without a measurement (`why_not`: missing, another dtype or shape than the reference's, not
// copied into the slot).
struct OutputPlan {
  int index = 0;
  std::optional<check::OutputBaseline> baseline;
  std::optional<check::CandidatePass> pass;
  std::string why_not;
};

// The plan of every output of case `c` (its `baselines[variant]`, one per reference output)
// against the forward's answer `run` (its outputs' descriptions and `copied`). A baseline
// missing from the case is kbv's fault (throws std::runtime_error).
std::vector<OutputPlan> plan_outputs(const nlohmann::json& c, const nlohmann::json& run,
                                     std::string_view reference_variant,
                                     const check::Policy& policy);

// The `passes` of the reference's judge request: [{index, spec}] for the planned passes.
nlohmann::json passes_of(const std::vector<OutputPlan>& plans);

// The outputs judged from the plan and the reference's measurements (`measured`: its judge
// answer's `outputs`, [{index, measurement}]). A planned pass without its measurement is kbv's
// fault (throws std::runtime_error).
OutputsJudgement judge_outputs(const std::vector<OutputPlan>& plans, const nlohmann::json& measured,
                               const check::Policy& policy);

// The case's outcome record (docs/result.md, correctness.cases) folded into its family.
void add_case_to_family(FamilyResult& family, const nlohmann::json& outcome);

}  // namespace kbv::judge
