#pragma once

// The per-element rule of a comparison pass, written once for the host pass (check/measure.cpp)
// and the device kernel (native/device_measure.cu): how a value is classified after a cast to the
// output dtype, the tolerance of an element, and the partial figures a range of elements adds up
// to. Partials merge in any order to the same figures (up to the rounding of the float sums), so
// a kernel may split the elements over threads and blocks however it likes.
//
// nvcc-safe (C++17, no library beyond <cmath>); KBV_HD marks the functions both sides compile.

#include <cmath>
#include <cstdint>

#include "tensor/dtype.hpp"

namespace kbv::check {

inline constexpr double kInfinity = __builtin_huge_val();
// Stands in for a zero scale or norm (an all-zero truth) so that ratios stay defined; an exactly
// zero candidate then has zero error and passes, anything else fails.
inline constexpr double kZeroFloor = 1e-30;
// Sums of squares scale by at most 2^1000 (finite), so subnormal values still count.
inline constexpr int kMinSquareExponent = -1000;

KBV_HD inline double max_of(double a, double b) { return a < b ? b : a; }
KBV_HD inline double nonzero_or_floor(double x) { return x > 0 ? x : kZeroFloor; }

// ---- non-finite values ----------------------------------------------------------------------

enum class Kind : std::uint8_t { Finite, NaN, PosInf, NegInf };

// Smallest magnitude a double rounds to infinity at when cast to `d` (round to nearest even: the
// halfway point above the largest finite value goes up, since that value's mantissa is odd).
KBV_HD inline double overflow_threshold(tensor::DType d) {
  switch (d) {
    case tensor::DType::F32:
      return 0x1p128 - 0x1p103;
    case tensor::DType::BF16:
      return 0x1p128 - 0x1p119;
    case tensor::DType::F16:
      return 65520.0;
    default:
      return kInfinity;
  }
}

// Classifies `v` as it would be after a cast to the output dtype (given by its threshold).
KBV_HD inline Kind classify(double v, double threshold) {
  if (v != v) return Kind::NaN;
  if (v >= threshold) return Kind::PosInf;
  if (v <= -threshold) return Kind::NegInf;
  return Kind::Finite;
}

// ---- the pass's parameters ------------------------------------------------------------------

// The floor of element i's budget: abs + rel * |y_i| (with sensitivity, see PassSpec::sens).
struct Tolerance {
  double abs = 0, rel = 0;
  KBV_HD double at(double judged) const { return abs + rel * fabs(judged); }
};

// One pass of `x` (the tensor judged) against `y` (the tensor it is judged by).
struct PassSpec {
  double threshold = kInfinity;  // overflow threshold of the output dtype
  double scale = 0;              // RMS of the judging tensor's finite values
  Tolerance tol;
  bool nan_equal = true;  // whether NaN against NaN is a match (allclose says no)
  // Multiplier of the element's own rounding sensitivity s_i (a third tensor beside x and y,
  // docs/protocol.md "Correctness"): element i is within budget when
  //   |x_i - y_i| <= max(tol.abs + tol.rel * |y_i|, sens * s_i).
  // 0 (or no sensitivity tensor) leaves the floor alone.
  double sens = 0;
  KBV_HD double budget(double judged, double sensitivity) const {
    return max_of(tol.at(judged), sens * sensitivity);
  }
};

// ---- sums of squares ------------------------------------------------------------------------

// A sum of squares kept as sum * 2^(2 * exponent): values are scaled by a power of two (exact)
// before squaring, so outputs near 1e300 do not overflow and outputs near 1e-300 do not vanish.
// An empty sum has sum == 0 and any exponent.
struct SquareSum {
  double sum;
  int exponent;
};

KBV_HD inline SquareSum empty_squares() { return SquareSum{0.0, 0}; }

KBV_HD inline int square_exponent_of(double magnitude) {
  const int e = ilogb(magnitude);
  return e < kMinSquareExponent ? kMinSquareExponent : e;
}

// Adds x^2. The exponent follows the largest magnitude seen, so the scaled values stay below 2.
KBV_HD inline void add_square(SquareSum& s, double x) {
  const double a = fabs(x);
  if (!(a < kInfinity)) {  // a difference of two huge finite values overflowed
    s.sum = kInfinity;
    return;
  }
  if (a == 0) return;
  double scaled = ldexp(a, -s.exponent);
  if (s.sum == 0 || scaled >= 2.0) {
    const int e = square_exponent_of(a);
    if (s.sum != 0) s.sum = ldexp(s.sum, 2 * (s.exponent - e));
    s.exponent = e;
    scaled = ldexp(a, -e);
  }
  s.sum += scaled * scaled;
}

// Adds `sum` * 2^(2 * exponent). Commutative: merge(a, b) and merge(b, a) are the same double.
KBV_HD inline SquareSum merge_squares(SquareSum a, SquareSum b) {
  if (a.sum == 0) return b;
  if (b.sum == 0) return a;
  if (a.exponent < b.exponent) {
    const SquareSum t = a;
    a = b;
    b = t;
  }
  return SquareSum{a.sum + ldexp(b.sum, 2 * (b.exponent - a.exponent)), a.exponent};
}

KBV_HD inline double root_of(const SquareSum& s) { return ldexp(sqrt(s.sum), s.exponent); }

// Root mean square over `count` values.
KBV_HD inline double rms_of(const SquareSum& s, std::int64_t count) {
  return count > 0 ? ldexp(sqrt(s.sum / static_cast<double>(count)), s.exponent) : 0;
}

// ||num|| / ||den||, without forming either norm (each may overflow on its own).
KBV_HD inline double norm_ratio(const SquareSum& num, const SquareSum& den) {
  if (num.sum == 0) return 0;
  if (den.sum == 0) return root_of(num) / kZeroFloor;
  return ldexp(sqrt(num.sum / den.sum), num.exponent - den.exponent);
}

// ---- the partial figures of a pass ----------------------------------------------------------

// What a range of elements contributes to a pass: a plain struct (no constructor) so that a
// kernel can keep an array of them in shared memory. Start from empty_partial().
struct PassPartial {
  double max_abs;
  double max_rel;           // over elements whose y is non-zero
  double worst_elem_ratio;  // max of |x - y| / (|y| + scale)
  double budget_ratio;      // max of |x - y| / budget (infinite where a budget of 0 is exceeded)
  std::int64_t elements_over;
  std::int64_t worst;   // index of the largest |x - y| / tol (ties: the smallest index); -1: none
  double worst_excess;  // that ratio (infinite where tol is 0)
  std::int64_t nonfinite_mismatches;
  std::int64_t first_nonfinite_mismatch;  // smallest index; -1: none
  SquareSum diff, judged;                 // of x - y and of y, over the finite pairs
  // Of the sensitivity s over the finite pairs: ||s|| / ||y|| is the normwise error the
  // precision class's rounding is expected to cause (the normwise budget's sensitivity term).
  SquareSum sens;
  // Of x - y and of y over the finite pairs whose budget the sensitivity does not open (the
  // floor is the larger): these keep the normwise budget without the sensitivity's term, so
  // ill-conditioned elements elsewhere never loosen it for them.
  SquareSum diff_conditioned, judged_conditioned;
};

KBV_HD inline PassPartial empty_partial() {
  PassPartial p;
  p.max_abs = p.max_rel = p.worst_elem_ratio = p.budget_ratio = 0;
  p.elements_over = 0;
  p.worst = -1;
  p.worst_excess = 0;
  p.nonfinite_mismatches = 0;
  p.first_nonfinite_mismatch = -1;
  p.diff = p.judged = p.sens = p.diff_conditioned = p.judged_conditioned = empty_squares();
  return p;
}

// Branch-free: both values stay finite in the output dtype (false for NaN).
KBV_HD inline bool pair_is_finite(double x, double y, double threshold) {
  return (fabs(x) < threshold) & (fabs(y) < threshold);
}

// For a pair that is not finite: counts a mismatch when the kinds differ (or both are NaN and NaN
// does not match), then zeroes both, so that the pair adds nothing to the error figures or the
// norms.
KBV_HD inline void screen_nonfinite(PassPartial& p, std::int64_t index, double& x, double& y,
                                    const PassSpec& spec) {
  const Kind kx = classify(x, spec.threshold), ky = classify(y, spec.threshold);
  if (kx == Kind::Finite && ky == Kind::Finite) return;
  if (kx != ky || (kx == Kind::NaN && !spec.nan_equal)) {
    ++p.nonfinite_mismatches;
    if (p.first_nonfinite_mismatch < 0 || index < p.first_nonfinite_mismatch) {
      p.first_nonfinite_mismatch = index;
    }
  }
  x = y = 0;
}

// Replaces the worst element when `excess` is larger, or equal at a smaller index.
KBV_HD inline void offer_worst(PassPartial& p, std::int64_t index, double excess) {
  if (p.worst < 0 || excess > p.worst_excess || (excess == p.worst_excess && index < p.worst)) {
    p.worst = index;
    p.worst_excess = excess;
  }
}

// The figures of one finite pair but its squares; returns x - y. `ratio_scale` is
// nonzero_or_floor(spec.scale); `sensitivity` is s_i (0 without a sensitivity tensor).
KBV_HD inline double accumulate_finite(PassPartial& p, std::int64_t index, double x, double y,
                                       const PassSpec& spec, double ratio_scale,
                                       double sensitivity) {
  const double diff = x - y;
  const double d = fabs(diff), judged = fabs(y);
  p.max_abs = max_of(p.max_abs, d);
  // A division only when a maximum moves (rarely, past the first elements): divisions dominated
  // the host loop.
  if (d > p.max_rel * judged && judged > 0) p.max_rel = max_of(p.max_rel, d / judged);
  if (d > p.worst_elem_ratio * (judged + ratio_scale)) {
    p.worst_elem_ratio = max_of(p.worst_elem_ratio, d / (judged + ratio_scale));
  }
  const double tol = spec.budget(judged, sensitivity);
  // The margin of the pass under the budget actually applied (a division only when it moves).
  if (d > p.budget_ratio * tol)
    p.budget_ratio = tol > 0 ? max_of(p.budget_ratio, d / tol) : kInfinity;
  if (!(d <= tol)) {
    ++p.elements_over;
    offer_worst(p, index, tol > 0 ? d / tol : kInfinity);
  }
  return diff;
}

// Whether element y's budget is the floor's, not opened by its sensitivity s.
KBV_HD inline bool conditioned(double y, double s, const PassSpec& spec) {
  return spec.sens * s <= spec.tol.at(fabs(y));
}

// Element `index` of the pass: x judged by y, with y's sensitivity s (0 without one).
KBV_HD inline void accumulate(PassPartial& p, std::int64_t index, double x, double y, double s,
                              const PassSpec& spec) {
  if (!pair_is_finite(x, y, spec.threshold)) {
    screen_nonfinite(p, index, x, y, spec);
    s = 0;  // a pair left out of the norms is left out of the sensitivity's too
  }
  const double diff = accumulate_finite(p, index, x, y, spec, nonzero_or_floor(spec.scale), s);
  add_square(p.diff, diff);
  add_square(p.judged, y);
  add_square(p.sens, s);
  if (conditioned(y, s, spec)) {
    add_square(p.diff_conditioned, diff);
    add_square(p.judged_conditioned, y);
  }
}

// The figures of a and b together; the same whichever comes first.
KBV_HD inline PassPartial merge(const PassPartial& a, const PassPartial& b) {
  PassPartial m;
  m.max_abs = max_of(a.max_abs, b.max_abs);
  m.max_rel = max_of(a.max_rel, b.max_rel);
  m.worst_elem_ratio = max_of(a.worst_elem_ratio, b.worst_elem_ratio);
  m.budget_ratio = max_of(a.budget_ratio, b.budget_ratio);
  m.elements_over = a.elements_over + b.elements_over;
  m.worst = a.worst;
  m.worst_excess = a.worst_excess;
  if (b.worst >= 0) offer_worst(m, b.worst, b.worst_excess);
  m.nonfinite_mismatches = a.nonfinite_mismatches + b.nonfinite_mismatches;
  m.first_nonfinite_mismatch = a.first_nonfinite_mismatch;
  if (b.first_nonfinite_mismatch >= 0 &&
      (m.first_nonfinite_mismatch < 0 || b.first_nonfinite_mismatch < m.first_nonfinite_mismatch)) {
    m.first_nonfinite_mismatch = b.first_nonfinite_mismatch;
  }
  m.diff = merge_squares(a.diff, b.diff);
  m.judged = merge_squares(a.judged, b.judged);
  m.sens = merge_squares(a.sens, b.sens);
  m.diff_conditioned = merge_squares(a.diff_conditioned, b.diff_conditioned);
  m.judged_conditioned = merge_squares(a.judged_conditioned, b.judged_conditioned);
  return m;
}

// ---- the RMS of a tensor's finite values ----------------------------------------------------

struct RmsPartial {
  SquareSum squares;
  std::int64_t finite;
};

KBV_HD inline RmsPartial empty_rms() { return RmsPartial{empty_squares(), 0}; }

// Values that do not stay finite in the output dtype (threshold) are left out.
KBV_HD inline void accumulate_rms(RmsPartial& p, double v, double threshold) {
  if (classify(v, threshold) != Kind::Finite) return;
  ++p.finite;
  add_square(p.squares, v);
}

KBV_HD inline RmsPartial merge_rms(const RmsPartial& a, const RmsPartial& b) {
  return RmsPartial{merge_squares(a.squares, b.squares), a.finite + b.finite};
}

KBV_HD inline double rms_of(const RmsPartial& p) { return rms_of(p.squares, p.finite); }

}  // namespace kbv::check
