#pragma once

// What the reference worker tells the orchestrator about one reference output, once per case:
// the contract a candidate must match (dtype, shape), the scales of the truth and of the
// reference, and how far the reference itself is from the truth. The tensors stay where they
// are; only these figures travel (as JSON) to the policy in check/compare.hpp.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "check/measure.hpp"
#include "tensor/view.hpp"

namespace kbv::check {

struct OutputBaseline {
  tensor::DType dtype = tensor::DType::F32;  // the contract a candidate must match
  std::vector<int64_t> shape;
  tensor::DType truth_dtype = tensor::DType::F32;
  bool truth_is_reference = false;  // no float64 run: the reference stands in for the truth
  double truth_scale = 0;           // finite RMS of the truth within the output dtype's range
  double reference_scale = 0;       // the same of the reference variant (allclose figures)
  // The reference variant against the truth under baseline_spec(); absent when
  // truth_is_reference.
  std::optional<Measurement> vs_truth;
  // The reference against the very elementwise budget a candidate gets (the floor opened by each
  // element's sensitivity: check/compare.hpp measure_baseline_budget), measured by the reference
  // worker while the reference's output still exists. The TF32 reference is admissible by
  // definition; where it is itself over that budget, the budget does not cover this problem's
  // arithmetic on this draw, and a candidate gets the reference's own excess (compare.hpp
  // decide). Absent under allclose protocols, for integer outputs and without a float64 truth.
  std::optional<Measurement> vs_budget;

  int64_t numel() const;
  nlohmann::json to_json() const;
  static OutputBaseline from_json(const nlohmann::json& j);
};

// The pass of the reference against the truth. Floating outputs: no elementwise tolerance (the
// baseline is within its own budget by construction, the budget being at least the multiplier
// times its worst ratio), NaN matches NaN. Integer and bool outputs: exact.
PassSpec baseline_spec(tensor::DType out, double truth_scale);

// The composition of the baseline over the passes of wherever the tensors live:
// truth_rms(threshold) and reference_rms(threshold) give finite RMS values,
// measure_reference(spec) the pass of the reference judged by the truth.
template <class TruthRms, class ReferenceRms, class MeasureReference>
OutputBaseline describe_baseline_with(tensor::DType dtype, std::vector<int64_t> shape,
                                      tensor::DType truth_dtype, bool truth_is_reference,
                                      TruthRms truth_rms, ReferenceRms reference_rms,
                                      MeasureReference measure_reference) {
  OutputBaseline b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.truth_dtype = truth_dtype;
  b.truth_is_reference = truth_is_reference;
  const double threshold = overflow_threshold(dtype);
  b.truth_scale = truth_rms(threshold);
  if (truth_is_reference) {
    b.reference_scale = b.truth_scale;
  } else {
    b.reference_scale = reference_rms(threshold);
    b.vs_truth = measure_reference(baseline_spec(dtype, b.truth_scale));
  }
  return b;
}

// The host composition. `truth` is the float64 run (same shape) or the reference itself (the
// same bytes and dtype: truth_is_reference). Throws std::invalid_argument when they disagree in
// shape (a harness bug, not the candidate's fault).
OutputBaseline describe_baseline(const tensor::TensorView& reference,
                                 const tensor::TensorView& truth);

}  // namespace kbv::check
