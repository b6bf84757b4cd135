#pragma once

// The measurement pass of a comparison: one tensor against the one it is judged by, reduced to
// figures (no judgement). It runs where the tensors live: this host pass over TensorViews, or the
// device kernel of kbv_native (native/device_measure.cu), both built on check/elementwise.hpp. The
// figures travel as JSON to the orchestrator, whose policy (check/compare.hpp) decides.
//
// nvcc-safe: the JSON functions are only declared here (json_fwd), and TensorView is forward
// declared, so the device code can build a Measurement from its partials.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "check/elementwise.hpp"

namespace kbv::tensor {
struct TensorView;
}

namespace kbv::check {

// JSON has no NaN or infinity: a finite double is written as a number, NaN as "nan" and the
// infinities as "inf" and "-inf". decode_double reads both forms back and throws
// std::invalid_argument on anything else.
nlohmann::json encode_double(double v);
double decode_double(const nlohmann::json& j);
// "nan", "inf", "-inf" (also "+inf", "infinity", any case) or a decimal number.
double parse_double(std::string_view text);

// Error of one output against the tensor it is judged by, over the positions where both are
// finite (non-finite positions are counted separately).
struct ErrorFigures {
  double max_abs = 0;
  double max_rel = 0;  // over elements whose truth is non-zero
  double normwise_rel = 0;
  double worst_elem_ratio = 0;  // max over elements of |c - t| / (|t| + scale)
  // max over elements of |c - t| / b_t, b_t the element's budget in the pass (PassSpec::budget):
  // the elementwise margin, > 1 exactly when some element is over.
  double budget_ratio = 0;
  int64_t numel = 0;
  int64_t elements_over = 0;  // elements outside their elementwise budget
  int64_t nonfinite_mismatches = 0;
  double scale = 0;  // RMS of the finite truth values (of the reference under AllClose)
  // ||s|| / ||t|| with s the truth's per-element rounding sensitivity (0 without one): the
  // normwise error the precision class's rounding of inputs and parameters is expected to cause
  // (an honest TF32 kernel measures about 0.4 of it: bench/sensitivity_calibration.py).
  double sensitivity_normwise = 0;
  // ||c - t|| / ||t|| over the elements whose budget the sensitivity does not open (all of them
  // without a sensitivity): the normwise error where rounding is not magnified.
  double normwise_conditioned = 0;
  nlohmann::json to_json() const;
  static ErrorFigures from_json(const nlohmann::json& j);
};

// The figures of a pass and the two elements a reason may name, with their values (as doubles,
// read from x and y as they are, before any cast).
struct Measurement {
  ErrorFigures figures;
  int64_t worst = -1;  // the element furthest over its tolerance (first of equals); -1 if none
  int64_t first_nonfinite_mismatch = -1;
  double x_at_worst = 0, y_at_worst = 0;  // 0 when there is no such element
  double s_at_worst = 0;                  // the sensitivity there (0 without a sensitivity tensor)
  double x_at_first_nonfinite = 0, y_at_first_nonfinite = 0;
  nlohmann::json to_json() const;
  static Measurement from_json(const nlohmann::json& j);
};

// {"threshold", "scale", "tol_abs", "tol_rel", "nan_equal", "sens"}: kbv_native.measure's spec
// argument ("sens" may be absent: 0).
nlohmann::json pass_spec_to_json(const PassSpec& spec);
PassSpec pass_spec_from_json(const nlohmann::json& j);

// The figures of a whole pass of `numel` elements from its merged partial; the values at the
// named elements are left 0 for the caller to read.
Measurement finish_measurement(const PassPartial& partial, int64_t numel, const PassSpec& spec);

// ---- the host pass --------------------------------------------------------------------------

// Elements [first, first + count) of x judged by y (indices stay global, so partials of disjoint
// ranges merge into the whole pass). `sens`: y's per-element rounding sensitivity (same element
// count), or nullptr for none (s_i = 0).
PassPartial measure_partial(const tensor::TensorView& x, const tensor::TensorView& y,
                            const tensor::TensorView* sens, const PassSpec& spec, int64_t first,
                            int64_t count);
// The whole pass, with the values at `worst` and `first_nonfinite_mismatch` read back. Throws
// std::invalid_argument when x, y (and sens) differ in element count.
Measurement measure(const tensor::TensorView& x, const tensor::TensorView& y, const PassSpec& spec,
                    const tensor::TensorView* sens = nullptr);
// RMS of the values of `t` that stay finite below `threshold` (0 when none does).
double finite_rms(const tensor::TensorView& t, double threshold);

}  // namespace kbv::check
