#include "judge/case_judge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace kbv::judge {
using nlohmann::json;

std::optional<std::string> judge_structure(const json& c, const json& run, Findings& out) {
  const std::string id = c["id"].get<std::string>();
  for (int index : run.value("inputs_mutated", json::array())) {
    out.add("inputs_mutated", Severity::Reject,
            fmt::format("the forward changed input {} in place on {}", index, id));
  }
  if (!run.value("outputs_aliasing_inputs", json::array()).empty() &&
      !c.value("reference_aliases_input", false)) {
    out.add("output_aliases_input", Severity::Reject,
            fmt::format("output {} shares storage with an input on {}",
                        run["outputs_aliasing_inputs"].dump(), id));
  }
  const auto& outs = run["outputs"];
  int expected = c["outputs"];
  if (run["structure"] != c["structure"] || static_cast<int>(outs.size()) != expected) {
    return fmt::format("returned {} ({} value{}) where the reference returns {} ({} value{})",
                       run["structure"] == "tensor" ? "a single value" : "a sequence", outs.size(),
                       outs.size() == 1 ? "" : "s",
                       c["structure"] == "tensor" ? "a tensor" : "a sequence", expected,
                       expected == 1 ? "" : "s");
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].contains("dtype")) {
      return fmt::format("output {} is a {}, not a tensor", i, outs[i]["type"].get<std::string>());
    }
    if (!outs[i].value("plain", false)) {
      out.add("output_not_plain_tensor", Severity::Reject,
              fmt::format("output {} is a {}, a subclass of torch.Tensor that can defer or fake "
                          "its values",
                          i, outs[i]["type"].get<std::string>()));
    }
  }
  return std::nullopt;
}

OutputsJudgement judge_outputs(const TensorLookup& candidate, const TensorLookup& golden, int count,
                               std::string_view reference_variant, const check::Policy& policy) {
  OutputsJudgement judged;
  judged.passed = true;
  for (int i = 0; i < count; ++i) {
    const auto* ref = golden(fmt::format("{}.out{}", reference_variant, i));
    const auto* truth = golden(fmt::format("truth.out{}", i));
    if (!ref || !truth) throw std::runtime_error(fmt::format("a case lacks golden output {}", i));
    const auto* cand = candidate(fmt::format("candidate.out{}", i));
    std::string why;
    if (!cand) {
      why = fmt::format("output {} is missing", i);
    } else {
      auto verdict = check::compare(*cand, *ref, *truth, policy);
      json o = verdict.to_json();
      o["index"] = i;
      judged.outputs.push_back(o);
      if (!verdict.passed) why = verdict.reason;
    }
    if (!why.empty() && judged.passed) {
      judged.passed = false;
      judged.reason = count > 1 && cand ? fmt::format("output {}: {}", i, why) : why;
    }
  }
  return judged;
}

void add_case_to_family(FamilyResult& family, const json& outcome) {
  if (outcome.value("passed", false)) family.passed += 1;
  for (const auto& o : outcome.value("outputs", json::array())) {
    // Figures are encoded so that the JSON holds no NaN or infinity ("inf" for an overflow).
    const auto figure = [&](const char* name) {
      const auto& c = o["candidate"];
      return c.contains(name) ? check::decode_double(c[name]) : 0.0;
    };
    family.max_abs = std::max(family.max_abs, figure("max_abs"));
    family.max_rel = std::max(family.max_rel, figure("max_rel"));
    family.normwise_rel = std::max(family.normwise_rel, figure("normwise_rel"));
  }
  family.cases.push_back(outcome);
}

}  // namespace kbv::judge
