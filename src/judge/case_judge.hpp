// One hidden case judged: first the structure of what the forward returned (count, type,
// storage shared with an input, inputs changed in place), then every output's figures against
// the golden outputs (check::compare under the protocol's policy). Pure: the worker's answer and
// tensor views in, an outcome and flags out; where the tensors live is the caller's business.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "check/compare.hpp"
#include "core/result.hpp"
#include "judge/findings.hpp"
#include "tensor/safetensors.hpp"

namespace kbv::judge {

// A tensor by name ("candidate.out0", "tf32.out0", "truth.out0"), or null when absent.
using TensorLookup = std::function<const tensor::TensorView*(std::string_view name)>;

// The structure of a forward's answer on case `c` (the reference's description of the case):
// flags for inputs changed in place, outputs sharing an input's storage (where the reference's
// do not) and tensor subclasses; the reason when the structure itself is wrong (nullopt: fine).
std::optional<std::string> judge_structure(const nlohmann::json& c, const nlohmann::json& run,
                                           Findings& out);

struct OutputsJudgement {
  bool passed = false;
  std::string reason;                                // the first failing output's
  nlohmann::json outputs = nlohmann::json::array();  // per output: figures, budgets, index
};

// Every one of `count` outputs of the candidate against the golden `<variant>.outI` and the
// truth `truth.outI`. A candidate output that is missing fails; a golden one missing is kbv's
// fault (throws std::runtime_error).
OutputsJudgement judge_outputs(const TensorLookup& candidate, const TensorLookup& golden, int count,
                               std::string_view reference_variant, const check::Policy& policy);

// The case's outcome record (docs/result.md, correctness.cases) folded into its family.
void add_case_to_family(FamilyResult& family, const nlohmann::json& outcome);

}  // namespace kbv::judge
