#pragma once

// The correctness decision: a candidate output against the reference output and the float64
// truth, under a named tolerance policy. docs/protocol.md ("Correctness") gives the budgets,
// why fixed allclose tolerances are not enough, and the TF32 figures behind the defaults.
//
// The policy works on figures only: the reference worker describes each reference output
// (OutputBaseline, check/baseline.hpp) and measures a candidate's output with the pass the
// policy plans (check/measure.hpp, on the device or the host); decide() turns the figures into an
// outcome. compare() composes the four steps on host tensors.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "check/baseline.hpp"
#include "check/measure.hpp"
#include "tensor/view.hpp"

namespace kbv::check {

enum class PolicyKind { Scaled, AllClose };

struct Policy {
  PolicyKind kind = PolicyKind::Scaled;
  // AllClose (KernelBench `standard`: 1e-4/1e-4 vs the FP32 reference; `kbv-paper`: 1e-3/1e-3 vs
  // the TF32 reference): |c - r| <= atol + rtol * |r| for every element; any NaN fails
  // (torch.allclose with equal_nan=False).
  double atol = 0, rtol = 0;
  // Scaled (kbv `verified`, truth is a float64 run of the reference): the candidate's error vs
  // truth must be within
  //   normwise:    ||c - t|| / ||t|| <= norm_budget,
  //                norm_budget = max(norm_floor, baseline_multiplier * the TF32 baseline's,
  //                                  sens_norm_multiplier * ||s|| / ||t||);
  //                where the last term is the larger, the elements whose budget the
  //                sensitivity does not open keep max(norm_floor, baseline_multiplier * ...)
  //                over their own norm
  //   elementwise: |c_i - t_i| <= max(elem_floor * (|t_i| + scale), sens_multiplier * s_i) for
  //                every i, scale = RMS of truth (an absolute floor sized to the output, so an
  //                all-zero output never passes a small-valued problem), s_i the element's own
  //                rounding sensitivity (RMS change of the float64 run under relative input and
  //                parameter perturbations of the precision class's unit roundoff, measured by
  //                the reference worker; 0 where there is no float64 truth)
  //   non-finite:  positions and kinds (NaN, +Inf, -Inf) of the truth cast to the output dtype
  //                must match the candidate's exactly.
  // Integer and bool outputs must be exact, up to the ties the reference itself resolves
  // differently from the truth.
  double norm_floor = 1e-3, elem_floor = 1e-2, baseline_multiplier = 4.0;
  // K of the elementwise budget (with the worker's SENSITIVITY_RUNS = 8 normal perturbations,
  // protocol version 4; docs/elementwise-budget.md): with m runs the ratio of an honest error to
  // s_i is t-distributed with m degrees of freedom, so K trades flips against how much an
  // ill-conditioned element may be off.
  double sens_multiplier = 16.0;
  // Kn of the normwise budget's sensitivity term (protocol version 4): ||s|| / ||t|| is the
  // normwise error rounding the inputs and parameters to the precision class causes, to first
  // order. An honest TF32 kernel measures 0.39-0.53 of it on wide-range convolutions and GEMMs
  // (a rounding error is uniform, RMS about 0.41 u against the perturbation's u), a stable
  // figure: a norm over every element. The floor alone failed such a kernel on the H100 (1.28e-3
  // against 1e-3: docs/results/h100-2026-12-05-s20/). 1.5 keeps it at a margin of 0.35 at
  // most while a bfloat16 kernel (8x the rounding: about 3.3 of it) fails, and moves a generic
  // mixed-sign product's budget (||s|| / ||t|| about sqrt(2) u = 6.9e-4) from 1e-3 to 1.04e-3.
  double sens_norm_multiplier = 1.5;
  // The reference's own excess (protocol version 3). The TF32 reference is admissible by
  // definition, so where it is itself over the elementwise budget on a case
  // (OutputBaseline::vs_budget: FFT or Winograd convolutions whose errors follow the whole
  // signal, a saturating function that rounding pushes across its knee, a draw whose s_i came out
  // small), a candidate over the budget passes the elementwise rule when it has at most
  // baseline_multiplier times as many elements over as the reference and none further over than
  // baseline_multiplier times the reference's worst: the same multiplier the normwise rule gives
  // the reference's normwise error. Where the reference is within its budget nothing changes.
  bool admit_reference_excess = true;
  // Where the sensitivity opens the normwise budget, the budget the elements it does not open
  // keep over their own norm follows the reference's own error over those same elements
  // (OutputBaseline::vs_budget's normwise_conditioned, protocol version 5), not its error over
  // every element: on outputs of a wide dynamic range the well-conditioned elements are the
  // small ones, whose relative error is several times the whole output's, and the reference's
  // own copy failed the rule (KernelBench's 49_Mamba2ReturnFinalState on the H100:
  // docs/results/h100-2026-12-07-s34/). False: version 4's rule, the error over every element.
  bool conditioned_budget_by_reference = true;

  static Policy verified();
  static Policy allclose(double atol, double rtol);
  nlohmann::json to_json() const;
  // The inverse of to_json (the reference worker receives the protocol's policy this way).
  static Policy from_json(const nlohmann::json& j);
};

struct Outcome {
  bool passed = false;
  // One human sentence: why it failed, or a note on a pass that needed the tie allowance.
  std::string reason;
  ErrorFigures candidate;
  std::optional<ErrorFigures> baseline;  // the reference against the truth (Scaled only)
  // norm_budget: the pass's (floor, baseline) opened by the sensitivity's normwise figure.
  double norm_budget = 0, elem_budget = 0;
  // Where the sensitivity opened norm_budget: the budget of the elements it does not open, over
  // their own norm (CandidatePass::norm_budget_conditioned).
  std::optional<double> norm_budget_conditioned;
  // How close the verdict was (scaled policy, floating outputs): the candidate's largest error
  // over its element's budget (ErrorFigures::budget_ratio), and its normwise error over the
  // normwise budget. A pass
  // has both at most 1; a user sees at a glance whether a verdict was narrow.
  std::optional<double> elem_margin, norm_margin;
  // The reference's own figures against the elementwise budget where it was measured (its
  // elements over and worst ratio): where they are not zero the budget admitted the reference's
  // excess (Policy::admit_reference_excess), and elem_margin is taken against that allowance.
  std::optional<ErrorFigures> reference_vs_budget;
  nlohmann::json to_json() const;
};

// The pass a candidate's output gets: its spec (tolerances, scale, NaN rule), whether it is judged
// by the truth (else by the reference variant: allclose), and the budgets of the scaled policy.
struct CandidatePass {
  PassSpec spec;
  bool against_truth = true;
  // elem_budget: the floor's relative factor F (elem_floor); each element's budget is
  // spec.budget(|t_i|, s_i).
  double norm_budget = 0, elem_budget = 0;
  // The normwise budget of the elements whose budget the sensitivity does not open, over their
  // own norm, where the sensitivity opens the normwise budget: at least norm_budget, and
  // baseline_multiplier times the reference's own error over those elements where it was
  // measured (Policy::conditioned_budget_by_reference).
  double norm_budget_conditioned = 0;
  nlohmann::json to_json() const;  // {"spec": pass_spec_to_json, "against_truth", budgets}
};

CandidatePass plan_candidate_pass(const OutputBaseline& baseline, const Policy& policy);

// Measures the reference against the elementwise budget its candidates get
// (OutputBaseline::vs_budget), where the policy has one: `measure_reference(spec)` is the pass of
// the reference judged by the truth, with the element's sensitivity where the worker has it.
template <class MeasureReference>
void measure_baseline_budget(OutputBaseline& b, const Policy& policy,
                             MeasureReference measure_reference) {
  if (policy.kind != PolicyKind::Scaled || !tensor::is_floating(b.dtype) || b.truth_is_reference) {
    return;
  }
  b.vs_budget = measure_reference(plan_candidate_pass(b, policy).spec);
}

// Why a candidate output of this dtype and shape cannot be judged against the baseline (it must
// match both exactly, even where torch would broadcast or upcast), or nullopt.
std::optional<std::string> contract_violation(tensor::DType dtype,
                                              const std::vector<int64_t>& shape,
                                              const OutputBaseline& baseline);

// The outcome of a candidate whose output (of `candidate_dtype`, meeting the contract) was
// measured with `pass`. Reasons name elements by the baseline's shape and show the measured
// values.
Outcome decide(const OutputBaseline& baseline, const CandidatePass& pass,
               const Measurement& candidate, tensor::DType candidate_dtype, const Policy& policy);

// describe_baseline + contract_violation + plan_candidate_pass + measure + decide on host tensors.
// `reference` is the baseline output in the problem's precision: its dtype and shape are the
// contract the candidate must match exactly. `truth` is the float64 run (same shape) or the
// reference itself when no float64 run exists; AllClose judges against `reference` and ignores
// `truth`. Throws std::invalid_argument when truth and reference disagree in shape (a harness
// bug, not the candidate's fault).
// `sensitivity`: the truth's per-element rounding sensitivity s (same shape), or nullptr where
// the worker measured none.
Outcome compare(const tensor::TensorView& candidate, const tensor::TensorView& reference,
                const tensor::TensorView& truth, const Policy& policy,
                const tensor::TensorView* sensitivity = nullptr);

}  // namespace kbv::check
