#include "check/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

namespace kbv::check {

namespace {

using tensor::DType;
using tensor::TensorView;

// ---- reasons --------------------------------------------------------------------------------

std::string bracketed(std::span<const int64_t> values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

std::string element_name(const std::vector<int64_t>& shape, int64_t flat) {
  if (shape.empty()) return "the scalar output";
  std::vector<int64_t> index(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    index[k] = flat % shape[k];
    flat /= shape[k];
  }
  return "element " + bracketed(index);
}

std::string value_string(double v, DType dtype) {
  return tensor::is_floating(dtype) || !std::isfinite(v) ? fmt::format("{:.6g}", v)
                                                         : fmt::format("{:.0f}", v);
}

// The tensor a candidate is judged by, as reasons name it.
struct Judge {
  std::string label;
  DType dtype;      // of the judging tensor, to print its values
  DType out_dtype;  // the output's dtype, to show values that overflow it
};

Judge judge_of(const OutputBaseline& b, const CandidatePass& pass) {
  if (!pass.against_truth || b.truth_is_reference) return {"the reference", b.dtype, b.dtype};
  return {b.truth_dtype == DType::F64 ? "the float64 truth" : "the truth", b.truth_dtype, b.dtype};
}

std::string judged_value(const Judge& j, double v) {
  std::string s = value_string(v, j.dtype);
  if (std::isfinite(v) && classify(v, overflow_threshold(j.out_dtype)) != Kind::Finite) {
    s += fmt::format(" (infinite in {})", tensor::torch_name(j.out_dtype));
  }
  return s;
}

// A candidate element against the judging one: index, the candidate's value x and the judged y.
struct Mismatch {
  int64_t index;
  double x, y;
};

Mismatch at_worst(const Measurement& m) { return {m.worst, m.x_at_worst, m.y_at_worst}; }
Mismatch at_first_nonfinite(const Measurement& m) {
  return {m.first_nonfinite_mismatch, m.x_at_first_nonfinite, m.y_at_first_nonfinite};
}

// How reasons name the candidate's elements.
struct Candidate {
  const std::vector<int64_t>& shape;
  DType dtype;
};

std::string mismatch_at(const Candidate& c, const Judge& j, const Mismatch& e) {
  return fmt::format("{} is {} where {} is {}", element_name(c.shape, e.index),
                     value_string(e.x, c.dtype), j.label, judged_value(j, e.y));
}

std::string nonfinite_reason(const Candidate& c, const Judge& j, const Measurement& m,
                             bool nan_equal) {
  return fmt::format("{} ({}; {} such element{})", mismatch_at(c, j, at_first_nonfinite(m)),
                     nan_equal ? "non-finite values must match in position and kind"
                               : "allclose fails on any NaN and needs infinities to match",
                     m.figures.nonfinite_mismatches,
                     m.figures.nonfinite_mismatches == 1 ? "" : "s");
}

std::string elementwise_reason(const Candidate& c, const Judge& j, const Measurement& m,
                               const PassSpec& spec) {
  const double floor = spec.tol.at(m.y_at_worst), opened = spec.sens * m.s_at_worst;
  return fmt::format("{} (error {:.3g} > budget {:.3g}{}); {} of {} elements over budget",
                     mismatch_at(c, j, at_worst(m)), std::abs(m.x_at_worst - m.y_at_worst),
                     spec.budget(std::abs(m.y_at_worst), m.s_at_worst),
                     opened > floor ? ", from the element's rounding sensitivity" : "",
                     m.figures.elements_over, m.figures.numel);
}

std::string normwise_reason(const Outcome& o, const Policy& p) {
  const double sens = o.candidate.sensitivity_normwise;
  return fmt::format(
      "normwise relative error {:.3g} exceeds the budget {:.3g} (the largest of the floor {:.3g}, "
      "{:g} x the baseline's {:.3g}{})",
      o.candidate.normwise_rel, o.norm_budget, p.norm_floor, p.baseline_multiplier,
      o.baseline->normwise_rel,
      sens > 0 ? fmt::format(" and {:g} x the rounding sensitivity's {:.3g}",
                             p.sens_norm_multiplier, sens)
               : std::string());
}

std::string conditioned_normwise_reason(const Outcome& o, const CandidatePass& pass,
                                        const OutputBaseline& b, const Policy& p) {
  const bool by_reference = pass.norm_budget_conditioned > pass.norm_budget;
  return fmt::format(
      "normwise relative error {:.3g} over the elements whose rounding sensitivity does not open "
      "their budget exceeds {:.3g} (the largest of the floor {:.3g}, {:g} x the baseline's "
      "{:.3g}{}; ill-conditioned elements elsewhere do not widen it)",
      o.candidate.normwise_conditioned, pass.norm_budget_conditioned, p.norm_floor,
      p.baseline_multiplier, o.baseline->normwise_rel,
      by_reference ? fmt::format(" and {:g} x its {:.3g} over those elements",
                                 p.baseline_multiplier, b.vs_budget->figures.normwise_conditioned)
                   : std::string());
}

// The pass's normwise budget opened by the sensitivity's own normwise figure, where the pass
// read a sensitivity (Policy::sens_norm_multiplier).
double normwise_budget(const CandidatePass& pass, const ErrorFigures& f, const Policy& p) {
  return std::max(pass.norm_budget, p.sens_norm_multiplier * f.sensitivity_normwise);
}

// Whether the sensitivity opened the normwise budget: then the elements it does not open keep
// the pass's own budget (a term summed over every element must not loosen it where rounding is
// not magnified).
bool normwise_opened(const CandidatePass& pass, const Outcome& o) {
  return o.norm_budget > pass.norm_budget;
}

// The reference against the truth: measured, or (the reference is the truth) no error at all.
ErrorFigures baseline_figures(const OutputBaseline& b) {
  if (b.vs_truth) return b.vs_truth->figures;
  ErrorFigures f;
  f.numel = b.numel();
  f.scale = b.truth_scale;
  return f;
}

// The reference's own excess over the elementwise budget on a case, and what it admits
// (Policy::admit_reference_excess).
struct ReferenceExcess {
  int64_t elements = 0;  // the reference's elements over its budget (> 0)
  double ratio = 0;      // its worst error over budget (> 1)
  double multiplier = 1;

  bool admits(const ErrorFigures& f) const {
    return f.elements_over <= allowed_elements() && f.budget_ratio <= allowed_ratio();
  }
  // The candidate's elementwise margin against the allowance: at most 1 exactly when the
  // elementwise rule passes (a candidate within every element's budget is within the allowance
  // too, the reference's worst being over 1).
  double margin_of(const ErrorFigures& f) const {
    const double count = allowed_elements() > 0 ? static_cast<double>(f.elements_over) /
                                                      static_cast<double>(allowed_elements())
                                                : (f.elements_over > 0 ? kInfinity : 0.0);
    return std::max(count, f.budget_ratio / allowed_ratio());
  }
  std::string describe() const {
    return fmt::format(
        " (the TF32 reference itself has {} element{} over budget, worst {:.3g}x: a candidate "
        "may have up to {} over, none beyond {:.3g}x)",
        elements, elements == 1 ? "" : "s", ratio, allowed_elements(), allowed_ratio());
  }
  int64_t allowed_elements() const {
    return static_cast<int64_t>(std::floor(multiplier * static_cast<double>(elements)));
  }
  double allowed_ratio() const { return multiplier * ratio; }
};

std::optional<ReferenceExcess> reference_excess(const OutputBaseline& b, const Policy& p) {
  if (!p.admit_reference_excess || !b.vs_budget) return std::nullopt;
  const ErrorFigures& f = b.vs_budget->figures;
  if (f.elements_over <= 0 || f.nonfinite_mismatches > 0) return std::nullopt;
  return ReferenceExcess{f.elements_over, f.budget_ratio, p.baseline_multiplier};
}

// ---- the three regimes ----------------------------------------------------------------------

Outcome decide_scaled(const OutputBaseline& b, const CandidatePass& pass, const Measurement& m,
                      const Candidate& c, const Policy& p) {
  Outcome o;
  o.baseline = baseline_figures(b);
  o.norm_budget = normwise_budget(pass, m.figures, p);
  o.elem_budget = pass.elem_budget;
  o.candidate = m.figures;
  // Against each element's own budget (floor or sensitivity), so a margin above 1 is exactly a
  // failing element.
  o.elem_margin = m.figures.budget_ratio;
  o.norm_margin = m.figures.normwise_rel / nonzero_or_floor(o.norm_budget);
  const bool opened = normwise_opened(pass, o);
  if (opened) {
    o.norm_budget_conditioned = pass.norm_budget_conditioned;
    o.norm_margin = std::max(*o.norm_margin, m.figures.normwise_conditioned /
                                                 nonzero_or_floor(pass.norm_budget_conditioned));
  }
  const Judge judge = judge_of(b, pass);
  const std::optional<ReferenceExcess> excess = reference_excess(b, p);
  if (excess) {
    o.reference_vs_budget = b.vs_budget->figures;
    o.elem_margin = excess->margin_of(m.figures);
  }
  std::string note;
  if (m.figures.nonfinite_mismatches > 0) {
    o.reason = nonfinite_reason(c, judge, m, true);
  } else if (m.figures.normwise_rel > o.norm_budget) {
    o.reason = normwise_reason(o, p);
  } else if (opened && m.figures.normwise_conditioned > pass.norm_budget_conditioned) {
    o.reason = conditioned_normwise_reason(o, pass, b, p);
  } else if (m.figures.elements_over > 0) {
    o.reason = elementwise_reason(c, judge, m, pass.spec);
    if (excess && excess->admits(m.figures)) {
      note = fmt::format("passed with {}: within the reference's own excess{}", o.reason,
                         excess->describe());
      o.reason.clear();
    } else if (excess) {
      o.reason += ", beyond the reference's own excess" + excess->describe();
    }
  }
  o.passed = o.reason.empty();
  if (o.passed) o.reason = note;
  return o;
}

// Integer and bool outputs: exact, but the float64 run may break ties (argmax of equal values)
// differently from the reference, so the candidate may differ from the truth in as many
// elements as the reference does.
Outcome decide_exact(const OutputBaseline& b, const CandidatePass& pass, const Measurement& m,
                     const Candidate& c) {
  const auto differing = [](const ErrorFigures& f) {
    return f.elements_over + f.nonfinite_mismatches;
  };
  Outcome o;
  o.baseline = baseline_figures(b);
  o.candidate = m.figures;
  const int64_t allowed = differing(*o.baseline), got = differing(m.figures);
  o.passed = got <= allowed;
  if (got == 0) return o;
  const Judge judge = judge_of(b, pass);
  const std::string first =
      mismatch_at(c, judge, m.worst >= 0 ? at_worst(m) : at_first_nonfinite(m));
  if (o.passed) {
    o.reason = fmt::format(
        "passed with {} of {} elements differing from {}, within the {} where the reference "
        "itself differs (ties resolved differently in float64); e.g. {}",
        got, m.figures.numel, judge.label, allowed, first);
  } else if (allowed == 0) {
    o.reason = fmt::format("{}; {} output must match exactly, and {} of {} elements differ", first,
                           tensor::torch_name(b.dtype), got, m.figures.numel);
  } else {
    o.reason = fmt::format(
        "{}; {} of {} elements differ, more than the {} where the reference itself differs (the "
        "allowance for ties resolved differently in float64)",
        first, got, m.figures.numel, allowed);
  }
  return o;
}

Outcome decide_allclose(const OutputBaseline& b, const CandidatePass& pass, const Measurement& m,
                        const Candidate& c) {
  Outcome o;
  o.candidate = m.figures;
  const Judge judge = judge_of(b, pass);
  if (m.figures.nonfinite_mismatches > 0) {
    o.reason = nonfinite_reason(c, judge, m, false);
  } else if (m.figures.elements_over > 0) {
    o.reason = elementwise_reason(c, judge, m, pass.spec);
  }
  o.passed = o.reason.empty();
  return o;
}

}  // namespace

// ---- public API -----------------------------------------------------------------------------

Policy Policy::verified() { return Policy{}; }

Policy Policy::allclose(double atol, double rtol) {
  Policy p;
  p.kind = PolicyKind::AllClose;
  p.atol = atol;
  p.rtol = rtol;
  return p;
}

nlohmann::json Policy::to_json() const {
  if (kind == PolicyKind::AllClose) {
    return {{"kind", "allclose"}, {"atol", atol}, {"rtol", rtol}, {"equal_nan", false}};
  }
  return {{"kind", "scaled"},
          {"norm_floor", norm_floor},
          {"elem_floor", elem_floor},
          {"baseline_multiplier", baseline_multiplier},
          {"sens_multiplier", sens_multiplier},
          {"sens_norm_multiplier", sens_norm_multiplier},
          {"admit_reference_excess", admit_reference_excess},
          {"conditioned_budget_by_reference", conditioned_budget_by_reference}};
}

Policy Policy::from_json(const nlohmann::json& j) {
  const auto kind = j.at("kind").get<std::string>();
  if (kind == "allclose") return allclose(j.at("atol").get<double>(), j.at("rtol").get<double>());
  if (kind != "scaled") throw std::invalid_argument("unknown policy kind '" + kind + "'");
  Policy p;
  p.norm_floor = j.at("norm_floor").get<double>();
  p.elem_floor = j.at("elem_floor").get<double>();
  p.baseline_multiplier = j.at("baseline_multiplier").get<double>();
  p.sens_multiplier = j.at("sens_multiplier").get<double>();
  // Absent from policies written before protocol version 4: no sensitivity term.
  p.sens_norm_multiplier = j.value("sens_norm_multiplier", 0.0);
  p.admit_reference_excess = j.value("admit_reference_excess", false);
  // Absent from policies written before protocol version 5: the error over every element.
  p.conditioned_budget_by_reference = j.value("conditioned_budget_by_reference", false);
  return p;
}

nlohmann::json Outcome::to_json() const {
  nlohmann::json out = {{"passed", passed},
                        {"reason", reason},
                        {"candidate", candidate.to_json()},
                        {"baseline", baseline ? baseline->to_json() : nlohmann::json(nullptr)},
                        {"norm_budget", encode_double(norm_budget)},
                        {"elem_budget", encode_double(elem_budget)}};
  if (norm_budget_conditioned) {
    out["norm_budget_conditioned"] = encode_double(*norm_budget_conditioned);
  }
  if (reference_vs_budget) {
    out["reference_vs_budget"] = {
        {"elements_over", reference_vs_budget->elements_over},
        {"budget_ratio", encode_double(reference_vs_budget->budget_ratio)}};
  }
  if (elem_margin && norm_margin) {
    out["margins"] = {{"elementwise", encode_double(*elem_margin)},
                      {"normwise", encode_double(*norm_margin)}};
  }
  return out;
}

nlohmann::json CandidatePass::to_json() const {
  return {{"spec", pass_spec_to_json(spec)},
          {"against_truth", against_truth},
          {"norm_budget", encode_double(norm_budget)},
          {"norm_budget_conditioned", encode_double(norm_budget_conditioned)},
          {"elem_budget", encode_double(elem_budget)}};
}

CandidatePass plan_candidate_pass(const OutputBaseline& b, const Policy& p) {
  const double threshold = overflow_threshold(b.dtype);
  CandidatePass pass;
  if (p.kind == PolicyKind::AllClose) {
    pass.spec = {threshold, b.reference_scale, {p.atol, p.rtol}, false};
    pass.against_truth = false;
    return pass;
  }
  if (!tensor::is_floating(b.dtype)) {
    pass.spec = baseline_spec(b.dtype, b.truth_scale);
    return pass;
  }
  const ErrorFigures base = baseline_figures(b);
  pass.norm_budget = std::max(p.norm_floor, p.baseline_multiplier * base.normwise_rel);
  pass.norm_budget_conditioned = pass.norm_budget;
  // The reference over the same elements, measured with the same sensitivity (a pass whose
  // sensitivity was deferred measured the reference with none: every element counts, the
  // figure is its error over all of them and the budget stays norm_budget).
  if (p.conditioned_budget_by_reference && b.vs_budget) {
    const double own = b.vs_budget->figures.normwise_conditioned;
    if (std::isfinite(own)) {
      pass.norm_budget_conditioned = std::max(pass.norm_budget, p.baseline_multiplier * own);
    }
  }
  // The elementwise budget no longer follows the baseline's worst element (a heavy-tailed
  // maximum that moved between draws): a fixed floor, opened per element by its sensitivity.
  pass.elem_budget = p.elem_floor;
  pass.spec = {threshold,
               b.truth_scale,
               {pass.elem_budget * nonzero_or_floor(b.truth_scale), pass.elem_budget},
               true,
               p.sens_multiplier};
  return pass;
}

std::optional<std::string> contract_violation(DType dtype, const std::vector<int64_t>& shape,
                                              const OutputBaseline& b) {
  if (dtype != b.dtype) {
    return fmt::format("dtype {} differs from the reference's {}", tensor::torch_name(dtype),
                       tensor::torch_name(b.dtype));
  }
  if (shape != b.shape) {
    return fmt::format("shape {} differs from the reference's {}", bracketed(shape),
                       bracketed(b.shape));
  }
  return std::nullopt;
}

Outcome decide(const OutputBaseline& baseline, const CandidatePass& pass,
               const Measurement& candidate, DType candidate_dtype, const Policy& policy) {
  const Candidate c{baseline.shape, candidate_dtype};
  if (policy.kind == PolicyKind::AllClose) return decide_allclose(baseline, pass, candidate, c);
  if (!tensor::is_floating(baseline.dtype)) return decide_exact(baseline, pass, candidate, c);
  return decide_scaled(baseline, pass, candidate, c, policy);
}

Outcome compare(const TensorView& candidate, const TensorView& reference, const TensorView& truth,
                const Policy& policy, const TensorView* sensitivity) {
  OutputBaseline baseline = describe_baseline(reference, truth);
  measure_baseline_budget(baseline, policy, [&](const PassSpec& spec) {
    return measure(reference, truth, spec, sensitivity);
  });
  if (auto violation = contract_violation(candidate.dtype, candidate.shape, baseline)) {
    Outcome o;
    o.reason = std::move(*violation);
    return o;
  }
  const CandidatePass pass = plan_candidate_pass(baseline, policy);
  const Measurement m = pass.against_truth ? measure(candidate, truth, pass.spec, sensitivity)
                                           : measure(candidate, reference, pass.spec);
  return decide(baseline, pass, m, candidate.dtype, policy);
}

}  // namespace kbv::check
