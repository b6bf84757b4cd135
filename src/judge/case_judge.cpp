#include "judge/case_judge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace kbv::judge {
using nlohmann::json;

void flag_mutated_inputs(const std::string& where, const json& mutated, Findings& out) {
  for (const auto& index : mutated) {
    out.add("inputs_mutated", Severity::Reject,
            fmt::format("the forward changed input {} in place on {}", index.dump(), where));
  }
}

std::optional<std::string> judge_structure(const json& c, const json& run, Findings& out) {
  const std::string id = c["id"].get<std::string>();
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

namespace {

std::string shape_text(const json& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i].get<long long>());
  }
  return out + "]";
}

}  // namespace

std::vector<OutputPlan> plan_outputs(const json& c, const json& run,
                                     std::string_view reference_variant,
                                     const check::Policy& policy) {
  const json& baselines = c.at("baselines").at(std::string(reference_variant));
  const json outs = run.value("outputs", json::array());
  const json copied = run.value("copied", json::array());
  std::vector<OutputPlan> plans;
  for (size_t i = 0; i < baselines.size(); ++i) {
    OutputPlan plan;
    plan.index = static_cast<int>(i);
    plan.baseline = check::OutputBaseline::from_json(baselines[i]);
    if (i >= outs.size() || !outs[i].contains("dtype")) {
      plan.why_not = fmt::format("output {} is missing", i);
    } else {
      std::vector<int64_t> shape;
      for (const auto& d : outs[i]["shape"]) shape.push_back(d.get<int64_t>());
      const auto dtype = tensor::parse_torch_dtype(outs[i]["dtype"].get<std::string>());
      if (!dtype) {
        plan.why_not = fmt::format("dtype {} differs from the reference's {}",
                                   outs[i]["dtype"].get<std::string>(),
                                   tensor::torch_name(plan.baseline->dtype));
      } else if (auto violation = check::contract_violation(*dtype, shape, *plan.baseline)) {
        plan.why_not = *violation;
      } else if (i >= copied.size() || !copied[i].get<bool>()) {
        // Same dtype and shape, yet not taken: a tensor subclass (flagged on its own) or a
        // tensor on another device than the reference's.
        plan.why_not = fmt::format("output {} ({} on {}, shape {}) could not be taken for judging",
                                   i, outs[i].value("type", "?"), outs[i].value("device", "?"),
                                   shape_text(outs[i]["shape"]));
      } else {
        plan.pass = check::plan_candidate_pass(*plan.baseline, policy);
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

json passes_of(const std::vector<OutputPlan>& plans) {
  json passes = json::array();
  for (const auto& p : plans) {
    if (!p.pass) continue;
    json pass = {{"index", p.index}, {"spec", check::pass_spec_to_json(p.pass->spec)}};
    // The normwise budget before the sensitivity opens it: a pass whose sensitivity the
    // reference worker deferred is measured with it when over this (docs/protocol.md).
    if (p.pass->spec.sens > 0) pass["norm_budget"] = check::encode_double(p.pass->norm_budget);
    passes.push_back(std::move(pass));
  }
  return passes;
}

OutputsJudgement judge_outputs(const std::vector<OutputPlan>& plans, const json& measured,
                               const check::Policy& policy) {
  OutputsJudgement judged;
  judged.passed = true;
  const int count = static_cast<int>(plans.size());
  for (const auto& plan : plans) {
    std::string why = plan.why_not;
    if (plan.pass) {
      const json* found = nullptr;
      for (const auto& m : measured) {
        if (m.value("index", -1) == plan.index) found = &m;
      }
      if (!found) {
        throw std::runtime_error(
            fmt::format("the reference did not measure output {}", plan.index));
      }
      auto measurement = check::Measurement::from_json((*found)["measurement"]);
      auto outcome =
          check::decide(*plan.baseline, *plan.pass, measurement, plan.baseline->dtype, policy);
      json o = outcome.to_json();
      o["index"] = plan.index;
      // "floor": every element within the floor of its budget, so its rounding sensitivity was
      // never measured (the margin is against the floor: an upper bound); else how it was.
      if (found->contains("budget")) o["budget"] = (*found)["budget"];
      judged.outputs.push_back(o);
      if (!outcome.passed) why = outcome.reason;
    }
    if (!why.empty() && judged.passed) {
      judged.passed = false;
      judged.reason = count > 1 && plan.pass ? fmt::format("output {}: {}", plan.index, why) : why;
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
    if (o.contains("margins")) {
      const auto grow = [](std::optional<double>& into, const json& j) {
        const double v = check::decode_double(j);
        if (!into || !(v <= *into)) into = v;  // NaN margins (a NaN figure) stay visible
      };
      grow(family.elem_margin, o["margins"]["elementwise"]);
      grow(family.norm_margin, o["margins"]["normwise"]);
    }
  }
  family.cases.push_back(outcome);
}

}  // namespace kbv::judge
