#include "check/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

namespace kbv::check {

namespace {

using tensor::DType;
using tensor::TensorView;

constexpr double kInf = std::numeric_limits<double>::infinity();
// Elements decoded per block: large enough to amortise the dtype dispatch, small enough that the
// four block buffers stay in L2.
constexpr size_t kBlock = 4096;
// Stands in for a zero scale or norm (an all-zero truth) so that ratios stay defined; an exactly
// zero candidate then has zero error and passes, anything else fails.
constexpr double kZeroFloor = 1e-30;

double nonzero_or_floor(double x) { return x > 0 ? x : kZeroFloor; }

// ---- non-finite values ----------------------------------------------------------------------

enum class Kind { Finite, NaN, PosInf, NegInf };

// Smallest magnitude a double rounds to infinity at when cast to `d` (round to nearest even: the
// halfway point above the largest finite value goes up, since that value's mantissa is odd).
double overflow_threshold(DType d) {
  switch (d) {
    case DType::F32:
      return 0x1p128 - 0x1p103;
    case DType::BF16:
      return 0x1p128 - 0x1p119;
    case DType::F16:
      return 65520.0;
    default:
      return kInf;
  }
}

// Classifies `v` as it would be after a cast to the output dtype (given by its threshold).
Kind classify(double v, double threshold) {
  if (std::isnan(v)) return Kind::NaN;
  if (v >= threshold) return Kind::PosInf;
  if (v <= -threshold) return Kind::NegInf;
  return Kind::Finite;
}

// ---- norms ----------------------------------------------------------------------------------

// A sum of squares kept as sum * 2^(2 * exponent): each block is scaled by a power of two (exact)
// before squaring, so outputs near 1e300 do not overflow and outputs near 1e-300 do not vanish.
class SumOfSquares {
 public:
  void add(std::span<const double> xs) {
    const double largest = lanes(
        xs, [](double acc, double x) { return std::max(acc, std::abs(x)); },
        [](double a, double b) { return std::max(a, b); });
    if (largest == 0) return;
    if (!std::isfinite(largest)) {
      sum_ = kInf;
      return;
    }
    const int exponent = std::max(std::ilogb(largest), -1000);
    const double factor = std::ldexp(1.0, -exponent);
    merge(lanes(
              xs, [factor](double acc, double x) { return acc + (x * factor) * (x * factor); },
              [](double a, double b) { return a + b; }),
          exponent);
  }

  double root() const { return std::ldexp(std::sqrt(sum_), exponent_); }
  // Root mean square over `count` values.
  double rms(int64_t count) const {
    return count > 0 ? std::ldexp(std::sqrt(sum_ / static_cast<double>(count)), exponent_) : 0;
  }
  // ||num|| / ||den||, without forming either norm (each may overflow on its own).
  static double ratio(const SumOfSquares& num, const SumOfSquares& den) {
    if (num.sum_ == 0) return 0;
    if (den.sum_ == 0) return num.root() / kZeroFloor;
    return std::ldexp(std::sqrt(num.sum_ / den.sum_), num.exponent_ - den.exponent_);
  }

 private:
  void merge(double sum, int exponent) {
    if (sum_ == 0) {
      sum_ = sum;
      exponent_ = exponent;
    } else if (exponent > exponent_) {
      sum_ = std::ldexp(sum_, 2 * (exponent_ - exponent)) + sum;
      exponent_ = exponent;
    } else {
      sum_ += std::ldexp(sum, 2 * (exponent - exponent_));
    }
  }

  // A reduction over four interleaved accumulators: one chain of dependent additions was the
  // bottleneck of the whole comparison.
  template <class Step, class Combine>
  static double lanes(std::span<const double> xs, Step step, Combine combine) {
    double acc[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= xs.size(); i += 4) {
      for (size_t k = 0; k < 4; ++k) acc[k] = step(acc[k], xs[i + k]);
    }
    for (; i < xs.size(); ++i) acc[0] = step(acc[0], xs[i]);
    return combine(combine(acc[0], acc[1]), combine(acc[2], acc[3]));
  }

  double sum_ = 0;
  int exponent_ = 0;
};

// ---- one pass over a pair of tensors --------------------------------------------------------

// Element i is within tolerance when |x_i - y_i| <= abs + rel * |y_i|.
struct Tolerance {
  double abs = 0, rel = 0;
  double at(double judged) const { return abs + rel * std::abs(judged); }
};

struct PassSpec {
  double threshold;  // overflow threshold of the output dtype
  double scale;      // RMS of the judging tensor's finite values
  Tolerance tol;
  bool nan_equal;  // whether NaN against NaN is a match (allclose says no)
};

struct Measurement {
  ErrorFigures figures;
  int64_t worst = -1;  // the element furthest over its tolerance (first of equals); -1 if none
  int64_t first_nonfinite_mismatch = -1;
};

// Decodes both tensors block by block and runs `visit(first, xs, ys)` on each block.
template <class Visit>
void for_each_block(const TensorView& x, const TensorView* y, Visit visit) {
  const int64_t n = x.numel();
  std::vector<double> xs(kBlock), ys(y != nullptr ? kBlock : 0);
  for (int64_t first = 0; first < n; first += static_cast<int64_t>(kBlock)) {
    const size_t len = static_cast<size_t>(std::min<int64_t>(kBlock, n - first));
    x.decode(first, {xs.data(), len});
    if (y != nullptr) y->decode(first, {ys.data(), len});
    visit(first, std::span<double>(xs.data(), len), std::span<double>(ys.data(), y ? len : 0));
  }
}

// RMS of the values that stay finite in the output dtype.
double finite_rms(const TensorView& t, double threshold) {
  SumOfSquares squares;
  int64_t finite = 0;
  for_each_block(t, nullptr, [&](int64_t, std::span<double> ts, std::span<double>) {
    for (double& v : ts) {
      if (classify(v, threshold) == Kind::Finite) {
        ++finite;
      } else {
        v = 0;
      }
    }
    squares.add(ts);
  });
  return squares.rms(finite);
}

// Non-finite values are rare, so blocks are screened for them with a branch-free loop first.
bool all_finite(std::span<const double> xs, std::span<const double> ys, double threshold) {
  bool finite = true;
  for (size_t i = 0; i < xs.size(); ++i) {
    finite &= (std::abs(xs[i]) < threshold) & (std::abs(ys[i]) < threshold);  // false for NaN
  }
  return finite;
}

// Counts the non-finite mismatches of a block and zeroes every non-finite pair, which then adds
// nothing to the error figures or the norms.
void neutralise_nonfinite(int64_t first, std::span<double> xs, std::span<double> ys,
                          const PassSpec& spec, Measurement& m) {
  for (size_t i = 0; i < xs.size(); ++i) {
    const Kind kx = classify(xs[i], spec.threshold), ky = classify(ys[i], spec.threshold);
    if (kx == Kind::Finite && ky == Kind::Finite) continue;
    if (kx != ky || (kx == Kind::NaN && !spec.nan_equal)) {
      if (m.figures.nonfinite_mismatches++ == 0) m.first_nonfinite_mismatch = first + int64_t(i);
    }
    xs[i] = ys[i] = 0;
  }
}

// Error figures of `x` judged by `y`, in one pass.
Measurement measure(const TensorView& x, const TensorView& y, const PassSpec& spec) {
  Measurement m;
  ErrorFigures& f = m.figures;
  f.numel = y.numel();
  f.scale = spec.scale;
  const double ratio_scale = nonzero_or_floor(spec.scale);
  double worst_excess = 0;
  SumOfSquares diff_squares, judged_squares;
  std::vector<double> diffs(kBlock);
  for_each_block(x, &y, [&](int64_t first, std::span<double> xs, std::span<double> ys) {
    if (!all_finite(xs, ys, spec.threshold)) neutralise_nonfinite(first, xs, ys, spec, m);
    for (size_t i = 0; i < xs.size(); ++i) {
      diffs[i] = xs[i] - ys[i];
      const double d = std::abs(diffs[i]), judged = std::abs(ys[i]);
      f.max_abs = std::max(f.max_abs, d);
      // A division only when the maximum moves (rarely, past the first blocks): divisions
      // dominated this loop.
      if (d > f.max_rel * judged && judged > 0) [[unlikely]] {
        f.max_rel = std::max(f.max_rel, d / judged);
      }
      if (d > f.worst_elem_ratio * (judged + ratio_scale)) [[unlikely]] {
        f.worst_elem_ratio = std::max(f.worst_elem_ratio, d / (judged + ratio_scale));
      }
      const double tol = spec.tol.at(judged);
      if (!(d <= tol)) [[unlikely]] {
        ++f.elements_over;
        const double excess = tol > 0 ? d / tol : kInf;
        if (excess > worst_excess || m.worst < 0) {
          worst_excess = excess;
          m.worst = first + int64_t(i);
        }
      }
    }
    diff_squares.add({diffs.data(), xs.size()});
    judged_squares.add(ys);
  });
  f.normwise_rel = SumOfSquares::ratio(diff_squares, judged_squares);
  return m;
}

// Figures of a tensor judged by itself, without the pass.
Measurement identical(const TensorView& t, double scale) {
  Measurement m;
  m.figures.numel = t.numel();
  m.figures.scale = scale;
  return m;
}

bool same_tensor(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.dtype == b.dtype;
}

// ---- reasons --------------------------------------------------------------------------------

std::string bracketed(std::span<const int64_t> values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

std::string element_name(const TensorView& v, int64_t flat) {
  if (v.shape.empty()) return "the scalar output";
  std::vector<int64_t> index(v.shape.size());
  for (size_t k = v.shape.size(); k-- > 0;) {
    index[k] = flat % v.shape[k];
    flat /= v.shape[k];
  }
  return "element " + bracketed(index);
}

std::string value_string(double v, DType dtype) {
  return tensor::is_floating(dtype) || !std::isfinite(v) ? fmt::format("{:.6g}", v)
                                                         : fmt::format("{:.0f}", v);
}

// The tensor a candidate is judged by, with how reasons name it.
struct Judge {
  const TensorView& view;
  std::string label;
  DType out_dtype;  // the output's dtype, to show values that overflow it
};

std::string judged_value(const Judge& j, int64_t i) {
  const double v = j.view.value_at(i);
  std::string s = value_string(v, j.view.dtype);
  if (std::isfinite(v) && classify(v, overflow_threshold(j.out_dtype)) != Kind::Finite) {
    s += fmt::format(" (infinite in {})", tensor::torch_name(j.out_dtype));
  }
  return s;
}

std::string mismatch_at(const TensorView& c, const Judge& j, int64_t i) {
  return fmt::format("{} is {} where {} is {}", element_name(c, i),
                     value_string(c.value_at(i), c.dtype), j.label, judged_value(j, i));
}

std::string nonfinite_reason(const TensorView& c, const Judge& j, const Measurement& m,
                             bool nan_equal) {
  return fmt::format("{} ({}; {} such element{})", mismatch_at(c, j, m.first_nonfinite_mismatch),
                     nan_equal ? "non-finite values must match in position and kind"
                               : "allclose fails on any NaN and needs infinities to match",
                     m.figures.nonfinite_mismatches,
                     m.figures.nonfinite_mismatches == 1 ? "" : "s");
}

std::string elementwise_reason(const TensorView& c, const Judge& j, const Measurement& m,
                               const Tolerance& tol) {
  const double error = std::abs(c.value_at(m.worst) - j.view.value_at(m.worst));
  return fmt::format("{} (error {:.3g} > budget {:.3g}); {} of {} elements over budget",
                     mismatch_at(c, j, m.worst), error, tol.at(j.view.value_at(m.worst)),
                     m.figures.elements_over, m.figures.numel);
}

std::string normwise_reason(const Outcome& o, const Policy& p) {
  return fmt::format(
      "normwise relative error {:.3g} exceeds the budget {:.3g} (the larger of the floor {:.3g} "
      "and {:g} x the baseline's {:.3g})",
      o.candidate.normwise_rel, o.norm_budget, p.norm_floor, p.baseline_multiplier,
      o.baseline->normwise_rel);
}

std::optional<std::string> contract_violation(const TensorView& c, const TensorView& r) {
  if (c.dtype != r.dtype) {
    return fmt::format("dtype {} differs from the reference's {}", tensor::torch_name(c.dtype),
                       tensor::torch_name(r.dtype));
  }
  if (c.shape != r.shape) {
    return fmt::format("shape {} differs from the reference's {}", bracketed(c.shape),
                       bracketed(r.shape));
  }
  return std::nullopt;
}

std::string truth_label(const TensorView& r, const TensorView& t) {
  if (same_tensor(r, t)) return "the reference";
  return t.dtype == DType::F64 ? "the float64 truth" : "the truth";
}

// ---- the three regimes ----------------------------------------------------------------------

Outcome compare_scaled(const TensorView& c, const TensorView& r, const TensorView& t,
                       const Policy& p) {
  const double threshold = overflow_threshold(r.dtype);
  const double scale = finite_rms(t, threshold);
  // The baseline is within its own budget by construction (the budget is at least the
  // multiplier times its worst ratio), so it is measured without an elementwise tolerance.
  const Measurement base =
      same_tensor(r, t) ? identical(t, scale) : measure(r, t, {threshold, scale, {kInf, 0}, true});
  Outcome o;
  o.baseline = base.figures;
  o.norm_budget = std::max(p.norm_floor, p.baseline_multiplier * base.figures.normwise_rel);
  o.elem_budget = std::max(p.elem_floor, p.baseline_multiplier * base.figures.worst_elem_ratio);
  const Tolerance tol{o.elem_budget * nonzero_or_floor(scale), o.elem_budget};
  const Measurement m = measure(c, t, {threshold, scale, tol, true});
  o.candidate = m.figures;

  const Judge judge{t, truth_label(r, t), r.dtype};
  if (m.figures.nonfinite_mismatches > 0) {
    o.reason = nonfinite_reason(c, judge, m, true);
  } else if (m.figures.normwise_rel > o.norm_budget) {
    o.reason = normwise_reason(o, p);
  } else if (m.figures.elements_over > 0) {
    o.reason = elementwise_reason(c, judge, m, tol);
  }
  o.passed = o.reason.empty();
  return o;
}

// Integer and bool outputs: exact, but the float64 run may break ties (argmax of equal values)
// differently from the reference, so the candidate may differ from the truth in as many
// elements as the reference does.
Outcome compare_exact(const TensorView& c, const TensorView& r, const TensorView& t) {
  const double threshold = overflow_threshold(r.dtype);
  const double scale = finite_rms(t, threshold);
  const PassSpec exact{threshold, scale, {0, 0}, true};
  const Measurement base = same_tensor(r, t) ? identical(t, scale) : measure(r, t, exact);
  const Measurement m = measure(c, t, exact);
  const auto differing = [](const Measurement& x) {
    return x.figures.elements_over + x.figures.nonfinite_mismatches;
  };
  const int64_t allowed = differing(base), got = differing(m);

  Outcome o;
  o.baseline = base.figures;
  o.candidate = m.figures;
  o.passed = got <= allowed;
  if (got == 0) return o;
  const Judge judge{t, truth_label(r, t), r.dtype};
  const std::string first =
      mismatch_at(c, judge, m.worst >= 0 ? m.worst : m.first_nonfinite_mismatch);
  if (o.passed) {
    o.reason = fmt::format(
        "passed with {} of {} elements differing from {}, within the {} where the reference "
        "itself differs (ties resolved differently in float64); e.g. {}",
        got, m.figures.numel, judge.label, allowed, first);
  } else if (allowed == 0) {
    o.reason = fmt::format("{}; {} output must match exactly, and {} of {} elements differ", first,
                           tensor::torch_name(r.dtype), got, m.figures.numel);
  } else {
    o.reason = fmt::format(
        "{}; {} of {} elements differ, more than the {} where the reference itself differs (the "
        "allowance for ties resolved differently in float64)",
        first, got, m.figures.numel, allowed);
  }
  return o;
}

Outcome compare_allclose(const TensorView& c, const TensorView& r, const Policy& p) {
  const double threshold = overflow_threshold(r.dtype);
  const Tolerance tol{p.atol, p.rtol};
  const Measurement m = measure(c, r, {threshold, finite_rms(r, threshold), tol, false});
  Outcome o;
  o.candidate = m.figures;
  const Judge judge{r, "the reference", r.dtype};
  if (m.figures.nonfinite_mismatches > 0) {
    o.reason = nonfinite_reason(c, judge, m, false);
  } else if (m.figures.elements_over > 0) {
    o.reason = elementwise_reason(c, judge, m, tol);
  }
  o.passed = o.reason.empty();
  return o;
}

}  // namespace

// ---- public API -----------------------------------------------------------------------------

nlohmann::json ErrorFigures::to_json() const {
  return {{"max_abs", max_abs},
          {"max_rel", max_rel},
          {"normwise_rel", normwise_rel},
          {"worst_elem_ratio", worst_elem_ratio},
          {"numel", numel},
          {"elements_over", elements_over},
          {"nonfinite_mismatches", nonfinite_mismatches},
          {"scale", scale}};
}

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
          {"baseline_multiplier", baseline_multiplier}};
}

nlohmann::json Outcome::to_json() const {
  return {{"passed", passed},
          {"reason", reason},
          {"candidate", candidate.to_json()},
          {"baseline", baseline ? baseline->to_json() : nlohmann::json(nullptr)},
          {"norm_budget", norm_budget},
          {"elem_budget", elem_budget}};
}

Outcome compare(const TensorView& candidate, const TensorView& reference, const TensorView& truth,
                const Policy& policy) {
  if (truth.shape != reference.shape) {
    throw std::invalid_argument(fmt::format("truth '{}' has shape {} but the reference has {}",
                                            truth.name, bracketed(truth.shape),
                                            bracketed(reference.shape)));
  }
  if (auto violation = contract_violation(candidate, reference)) {
    Outcome o;
    o.reason = std::move(*violation);
    return o;
  }
  if (policy.kind == PolicyKind::AllClose) return compare_allclose(candidate, reference, policy);
  if (!tensor::is_floating(reference.dtype)) return compare_exact(candidate, reference, truth);
  return compare_scaled(candidate, reference, truth, policy);
}

}  // namespace kbv::check
