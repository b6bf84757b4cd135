// The measurement pass (check/measure, check/elementwise.hpp): the host pass against the
// implementation it replaced (kept below as `legacy`, verbatim but for names) on random data of
// every dtype; the per-element rule the device kernel runs, simulated on the host with a
// grid-stride split over threads and a tree reduction per block, against the host pass; merges
// of partials in different orders; and the JSON of figures with NaN and infinities.

#include "check/measure.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <vector>

#include "check/baseline.hpp"
#include "check/compare.hpp"

namespace kbv::check {
namespace {

using nlohmann::json;
using tensor::DType;
using tensor::TensorView;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- the pass as it was before the split (src/check/compare.cpp at 3f665ae) -----------------

namespace legacy {

constexpr size_t kBlock = 4096;
constexpr double kZeroFloor = 1e-30;
double nonzero_or_floor(double x) { return x > 0 ? x : kZeroFloor; }

enum class Kind { Finite, NaN, PosInf, NegInf };

Kind classify(double v, double threshold) {
  if (std::isnan(v)) return Kind::NaN;
  if (v >= threshold) return Kind::PosInf;
  if (v <= -threshold) return Kind::NegInf;
  return Kind::Finite;
}

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
  double rms(int64_t count) const {
    return count > 0 ? std::ldexp(std::sqrt(sum_ / static_cast<double>(count)), exponent_) : 0;
  }
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

struct Result {
  ErrorFigures figures;
  int64_t worst = -1;
  int64_t first_nonfinite_mismatch = -1;
};

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

Result measure(const TensorView& x, const TensorView& y, const PassSpec& spec) {
  Result m;
  ErrorFigures& f = m.figures;
  f.numel = y.numel();
  f.scale = spec.scale;
  const double ratio_scale = nonzero_or_floor(spec.scale);
  double worst_excess = 0;
  SumOfSquares diff_squares, judged_squares;
  std::vector<double> diffs(kBlock);
  for_each_block(x, &y, [&](int64_t first, std::span<double> xs, std::span<double> ys) {
    for (size_t i = 0; i < xs.size(); ++i) {
      const Kind kx = classify(xs[i], spec.threshold), ky = classify(ys[i], spec.threshold);
      if (kx == Kind::Finite && ky == Kind::Finite) continue;
      if (kx != ky || (kx == Kind::NaN && !spec.nan_equal)) {
        if (m.figures.nonfinite_mismatches++ == 0) m.first_nonfinite_mismatch = first + int64_t(i);
      }
      xs[i] = ys[i] = 0;
    }
    for (size_t i = 0; i < xs.size(); ++i) {
      diffs[i] = xs[i] - ys[i];
      const double d = std::abs(diffs[i]), judged = std::abs(ys[i]);
      f.max_abs = std::max(f.max_abs, d);
      if (d > f.max_rel * judged && judged > 0) f.max_rel = std::max(f.max_rel, d / judged);
      if (d > f.worst_elem_ratio * (judged + ratio_scale)) {
        f.worst_elem_ratio = std::max(f.worst_elem_ratio, d / (judged + ratio_scale));
      }
      const double tol = spec.tol.abs + spec.tol.rel * judged;
      if (!(d <= tol)) {
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

}  // namespace legacy

// ---- tensors of every dtype -----------------------------------------------------------------

// Round to nearest even, as torch casts.
uint16_t to_half(double v) { return std::bit_cast<uint16_t>(static_cast<_Float16>(v)); }
uint16_t to_bfloat16(double v) {
  const auto bits = std::bit_cast<uint32_t>(static_cast<float>(v));
  if (std::isnan(static_cast<float>(v))) return 0x7fc0;
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

class Owned {
 public:
  Owned(DType dtype, const std::vector<double>& values) : dtype_(dtype) {
    bytes_.resize(values.size() * tensor::element_size(dtype));
    for (size_t i = 0; i < values.size(); ++i) store(i, values[i]);
  }
  TensorView view() const {
    return {"t",
            dtype_,
            {static_cast<int64_t>(bytes_.size() / tensor::element_size(dtype_))},
            bytes_.data(),
            bytes_.size()};
  }
  operator TensorView() const { return view(); }

 private:
  template <class T>
  void put(size_t i, T v) {
    std::memcpy(bytes_.data() + i * sizeof(T), &v, sizeof(T));
  }
  void store(size_t i, double v) {
    switch (dtype_) {
      case DType::F64:
        return put(i, v);
      case DType::F32:
        return put(i, static_cast<float>(v));
      case DType::F16:
        return put(i, to_half(v));
      case DType::BF16:
        return put(i, to_bfloat16(v));
      case DType::I64:
        return put(i, static_cast<int64_t>(v));
      case DType::I32:
        return put(i, static_cast<int32_t>(v));
      case DType::I16:
        return put(i, static_cast<int16_t>(v));
      case DType::I8:
        return put(i, static_cast<int8_t>(v));
      case DType::U8:
        return put(i, static_cast<uint8_t>(v));
      case DType::Bool:
        return put(i, static_cast<uint8_t>(v != 0));
    }
  }

  DType dtype_;
  std::vector<std::byte> bytes_;
};

// A truth (float64), and a candidate near it in `dtype`, with non-finite values, values that
// overflow the narrow float types and equal-excess elements where the dtype allows them.
struct Pair {
  std::vector<double> truth, candidate;
};

Pair random_pair(DType dtype, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_int_distribution<int> small(-100, 100);
  Pair p;
  p.truth.resize(n);
  p.candidate.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (tensor::is_floating(dtype)) {
      p.truth[i] = 100 * normal(rng);
      p.candidate[i] = p.truth[i] * (1 + 1e-3 * normal(rng));
    } else {
      const int v = dtype == DType::Bool ? small(rng) > 0
                    : dtype == DType::U8 ? small(rng) + 100
                                         : small(rng);
      p.truth[i] = v;
      p.candidate[i] = (i % 97 == 5) ? (dtype == DType::Bool ? 1 - v : v + 1) : v;
    }
  }
  if (tensor::is_floating(dtype)) {
    const double specials[] = {kNaN, kInf, -kInf, 1e39, -7e4, 1e300};
    for (size_t k = 0; k < 60; ++k) {
      const size_t i = (k * 7919 + 13) % n;
      const double s = specials[k % 6];
      p.truth[i] = s;
      p.candidate[i] = (k % 4 == 0) ? specials[(k + 1) % 6] : s;  // every fourth mismatches
    }
    // Two elements with the same error and the same truth: their excess ties.
    p.truth[n - 3] = p.truth[17] = 3.0;
    p.candidate[n - 3] = p.candidate[17] = 53.0;
  }
  return p;
}

PassSpec spec_for(DType out, double scale, bool nan_equal) {
  if (!tensor::is_floating(out)) return {overflow_threshold(out), scale, {0, 0}, true};
  return {overflow_threshold(out), scale, {1e-3 * scale, 1e-3}, nan_equal};
}

void expect_same(const ErrorFigures& a, const ErrorFigures& b, bool exact_sums) {
  EXPECT_EQ(a.max_abs, b.max_abs);
  EXPECT_DOUBLE_EQ(a.max_rel, b.max_rel);
  EXPECT_DOUBLE_EQ(a.worst_elem_ratio, b.worst_elem_ratio);
  if (exact_sums) {
    EXPECT_EQ(a.normwise_rel, b.normwise_rel);
  } else {
    EXPECT_NEAR(a.normwise_rel, b.normwise_rel, 1e-12 * std::abs(b.normwise_rel));
  }
  EXPECT_EQ(a.numel, b.numel);
  EXPECT_EQ(a.elements_over, b.elements_over);
  EXPECT_EQ(a.nonfinite_mismatches, b.nonfinite_mismatches);
  EXPECT_EQ(a.scale, b.scale);
  if (exact_sums) return;  // the legacy pass (exact sums) predates the figures below
  EXPECT_NEAR(a.sensitivity_normwise, b.sensitivity_normwise,
              1e-12 * std::abs(b.sensitivity_normwise));
  EXPECT_NEAR(a.normwise_conditioned, b.normwise_conditioned,
              1e-12 * std::abs(b.normwise_conditioned));
}

class EveryDtype : public ::testing::TestWithParam<DType> {};

TEST_P(EveryDtype, HostPassEqualsTheLegacyPass) {
  const DType dtype = GetParam();
  const size_t n = 3 * 4096 + 1234;  // a partial last block
  const Pair p = random_pair(dtype, n, 11);
  const Owned truth(DType::F64, p.truth), same_dtype_truth(dtype, p.truth);
  const Owned candidate(dtype, p.candidate);
  const double threshold = overflow_threshold(dtype);
  EXPECT_EQ(finite_rms(truth, threshold), legacy::finite_rms(truth, threshold));
  EXPECT_EQ(finite_rms(candidate, threshold), legacy::finite_rms(candidate, threshold));
  for (const TensorView& judge : {truth.view(), same_dtype_truth.view()}) {
    for (const bool nan_equal : {true, false}) {
      const PassSpec spec = spec_for(dtype, finite_rms(judge, threshold), nan_equal);
      const Measurement m = measure(candidate, judge, spec);
      const legacy::Result old = legacy::measure(candidate, judge, spec);
      SCOPED_TRACE(testing::Message()
                   << tensor::torch_name(dtype) << " judged by " << tensor::torch_name(judge.dtype)
                   << " nan_equal " << nan_equal);
      expect_same(m.figures, old.figures, /*exact_sums=*/true);
      EXPECT_EQ(m.worst, old.worst);
      EXPECT_EQ(m.first_nonfinite_mismatch, old.first_nonfinite_mismatch);
      if (m.worst >= 0) {
        EXPECT_EQ(m.x_at_worst, candidate.view().value_at(m.worst));
        EXPECT_EQ(m.y_at_worst, judge.value_at(m.worst));
      }
      if (m.first_nonfinite_mismatch >= 0) {
        EXPECT_TRUE(std::isnan(m.x_at_first_nonfinite) ||
                    m.x_at_first_nonfinite ==
                        candidate.view().value_at(m.first_nonfinite_mismatch));
      }
      if (tensor::is_floating(dtype)) {
        EXPECT_GT(m.figures.nonfinite_mismatches, 0);
        EXPECT_GT(m.figures.elements_over, 0);
      } else {
        EXPECT_EQ(m.figures.elements_over, static_cast<int64_t>((n - 6) / 97 + 1));
        EXPECT_EQ(m.worst, 5);  // every differing element has an infinite excess: the first
      }
    }
  }
}

// The device kernel's reduction, on the host: `threads` threads in blocks of `block`, each
// walking the elements grid-stride with accumulate(); a tree of merges in each block; the block
// partials merged in block order.
PassPartial simulate_device(const TensorView& x, const TensorView& y, const PassSpec& spec,
                            int threads, int block, const TensorView* s = nullptr) {
  const int64_t n = x.numel();
  std::vector<PassPartial> partials(threads, empty_partial());
  for (int t = 0; t < threads; ++t) {
    for (int64_t i = t; i < n; i += threads) {
      const double si = s != nullptr ? s->value_at(i) : 0.0;
      accumulate(partials[t], i, x.value_at(i), y.value_at(i), si, spec);
    }
  }
  PassPartial total = empty_partial();
  for (int b = 0; b < threads / block; ++b) {
    PassPartial* s = partials.data() + b * block;
    for (int stride = block / 2; stride > 0; stride /= 2) {
      for (int t = 0; t < stride; ++t) s[t] = merge(s[t], s[t + stride]);
    }
    total = merge(total, s[0]);
  }
  return total;
}

TEST_P(EveryDtype, SimulatedDevicePassEqualsTheHostPass) {
  const DType dtype = GetParam();
  const size_t n = 20011;
  const Pair p = random_pair(dtype, n, 12);
  const Owned truth(DType::F64, p.truth), candidate(dtype, p.candidate);
  const double threshold = overflow_threshold(dtype);
  const PassSpec spec = spec_for(dtype, finite_rms(truth, threshold), true);
  const Measurement host = measure(candidate, truth, spec);
  for (const auto& [threads, block] : {std::pair{256, 64}, std::pair{1024, 256}, {96, 32}}) {
    const Measurement device =
        finish_measurement(simulate_device(candidate, truth, spec, threads, block), n, spec);
    expect_same(device.figures, host.figures, /*exact_sums=*/false);
    EXPECT_EQ(device.worst, host.worst);
    EXPECT_EQ(device.first_nonfinite_mismatch, host.first_nonfinite_mismatch);
  }
  // With a sensitivity operand (float32, as the worker keeps it) opening some budgets: the same
  // figures and worst element both ways, and the sensitivity changed the verdict somewhere.
  std::vector<double> sens(n);
  for (size_t i = 0; i < n; ++i) sens[i] = (i % 3 == 0) ? 1e-3 * double(i % 101) : 0.0;
  const Owned s_owned(DType::F32, sens);
  const TensorView sv = s_owned.view();
  const TensorView* s = &sv;
  PassSpec opened = spec;
  opened.sens = 16;
  const Measurement host_s = measure(candidate, truth, opened, s);
  for (const auto& [threads, block] : {std::pair{256, 64}, std::pair{96, 32}}) {
    const Measurement device =
        finish_measurement(simulate_device(candidate, truth, opened, threads, block, s), n, opened);
    expect_same(device.figures, host_s.figures, /*exact_sums=*/false);
    EXPECT_EQ(device.worst, host_s.worst);
    EXPECT_EQ(device.figures.budget_ratio, host_s.figures.budget_ratio);
  }
  EXPECT_LE(host_s.figures.elements_over, host.figures.elements_over);
  EXPECT_LE(host_s.figures.budget_ratio, host.figures.budget_ratio);
  if (host_s.worst >= 0) EXPECT_EQ(host_s.s_at_worst, s->value_at(host_s.worst));
  // The RMS of the finite values, element by element and merged, against the blocked host pass.
  RmsPartial rms = empty_rms();
  for (size_t i = 0; i < n; ++i) accumulate_rms(rms, truth.view().value_at(i), threshold);
  EXPECT_NEAR(rms_of(rms), finite_rms(truth, threshold), 1e-12 * rms_of(rms));
}

TEST_P(EveryDtype, PartialsMergeInAnyOrder) {
  const DType dtype = GetParam();
  const size_t n = 5 * 4096 + 77;
  const Pair p = random_pair(dtype, n, 13);
  const Owned truth(DType::F64, p.truth), candidate(dtype, p.candidate);
  const PassSpec spec = spec_for(dtype, finite_rms(truth, overflow_threshold(dtype)), false);
  const int64_t bounds[] = {0, 1, 4000, 4097, 9000, 15000, 15001, int64_t(n)};
  std::vector<PassPartial> chunks;
  for (size_t k = 0; k + 1 < std::size(bounds); ++k) {
    chunks.push_back(
        measure_partial(candidate, truth, nullptr, spec, bounds[k], bounds[k + 1] - bounds[k]));
  }
  PassPartial forward = empty_partial(), backward = empty_partial();
  for (const auto& c : chunks) forward = merge(forward, c);
  for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) backward = merge(*it, backward);
  // A tree: pairs first.
  std::vector<PassPartial> level = chunks;
  while (level.size() > 1) {
    std::vector<PassPartial> next;
    for (size_t k = 0; k < level.size(); k += 2) {
      next.push_back(k + 1 < level.size() ? merge(level[k + 1], level[k]) : level[k]);
    }
    level = next;
  }
  const Measurement whole = measure(candidate, truth, spec);
  for (const PassPartial& merged : {forward, backward, level[0]}) {
    const Measurement m = finish_measurement(merged, n, spec);
    expect_same(m.figures, whole.figures, /*exact_sums=*/false);
    EXPECT_EQ(m.worst, whole.worst);
    EXPECT_EQ(m.first_nonfinite_mismatch, whole.first_nonfinite_mismatch);
  }
}

INSTANTIATE_TEST_SUITE_P(Measure, EveryDtype, ::testing::ValuesIn(tensor::kAllDTypes),
                         [](const auto& info) {
                           return std::string(tensor::torch_name(info.param));
                         });

// ---- the element rule -----------------------------------------------------------------------

TEST(Elementwise, TiesGoToTheSmallestIndexWhateverTheOrder) {
  const PassSpec spec{kInf, 1, {0.1, 0}, true};
  PassPartial late = empty_partial(), early = empty_partial();
  accumulate(late, 900, 1.5, 1.0, 0.0, spec);  // excess 5
  accumulate(early, 40, 2.5, 2.0, 0.0, spec);  // excess 5 too
  EXPECT_EQ(merge(late, early).worst, 40);
  EXPECT_EQ(merge(early, late).worst, 40);
  PassPartial one = empty_partial();
  accumulate(one, 900, 1.5, 1.0, 0.0, spec);
  accumulate(one, 40, 2.5, 2.0, 0.0, spec);  // seen after, but smaller
  EXPECT_EQ(one.worst, 40);
  accumulate(one, 7, 1.2, 1.0, 0.0, spec);  // smaller, but less over
  EXPECT_EQ(one.worst, 40);
}

// The budget of an element is the larger of the floor and K * s_i: the sensitivity opens it
// where it is larger, never narrows it below the floor, and the margin is the error over that
// budget.
TEST(Elementwise, SensitivityOpensTheBudgetAboveTheFloorOnly) {
  PassSpec spec;
  spec.scale = 1;
  spec.tol = {1e-2, 1e-2};  // floor 1e-2 * (|y| + 1)
  spec.sens = 16;
  EXPECT_DOUBLE_EQ(spec.budget(0.0, 0.0), 1e-2);
  EXPECT_DOUBLE_EQ(spec.budget(-1.0, 1e-4), 2e-2);  // 16 * 1e-4 < the floor 2e-2
  EXPECT_DOUBLE_EQ(spec.budget(0.0, 1e-2), 0.16);   // 16 * 1e-2 > the floor

  // Error 0.1 on a near-zero truth: over the floor (1e-2), within 16 * s = 0.16.
  PassPartial p = empty_partial();
  accumulate(p, 0, 0.1, 0.0, 1e-2, spec);
  EXPECT_EQ(p.elements_over, 0);
  EXPECT_NEAR(p.budget_ratio, 0.1 / 0.16, 1e-15);
  PassPartial floor_only = empty_partial();
  accumulate(floor_only, 0, 0.1, 0.0, 0.0, spec);
  EXPECT_EQ(floor_only.elements_over, 1);
  EXPECT_NEAR(floor_only.budget_ratio, 10.0, 1e-12);
  // Without the multiplier the same sensitivity opens nothing.
  PassSpec no_sens = spec;
  no_sens.sens = 0;
  PassPartial closed = empty_partial();
  accumulate(closed, 0, 0.1, 0.0, 1e-2, no_sens);
  EXPECT_EQ(closed.elements_over, 1);
  // A tiny sensitivity does not narrow the floor: error 5e-3 passes.
  PassPartial tiny = empty_partial();
  accumulate(tiny, 0, 5e-3, 0.0, 1e-9, spec);
  EXPECT_EQ(tiny.elements_over, 0);
  // A zero budget (zero scale, zero truth, zero sensitivity): any error is an infinite margin.
  PassSpec zero;
  zero.sens = 16;
  PassPartial z = empty_partial();
  accumulate(z, 0, 1e-30, 0.0, 0.0, zero);
  EXPECT_EQ(z.elements_over, 1);
  EXPECT_EQ(z.budget_ratio, kInf);
  EXPECT_EQ(merge(empty_partial(), z).budget_ratio, kInf);
}

// The host pass with a sensitivity tensor: an element opened by its sensitivity passes, one
// beyond it is named with its sensitivity, and the reason says where the budget came from.
TEST(Elementwise, HostPassReadsTheSensitivityAndNamesIt) {
  const Owned truth(DType::F64, {1.0, 0.0, 0.0, -2.0});
  const Owned candidate(DType::F32, {1.0, 0.1, 0.5, -2.0});
  const Owned sens(DType::F32, {0.0, 1e-2, 1e-2, 0.0});
  PassSpec spec;
  spec.scale = 1;
  spec.tol = {1e-2, 1e-2};
  spec.sens = 16;
  const TensorView sv = sens.view();
  const Measurement m = measure(candidate, truth, spec, &sv);
  EXPECT_EQ(m.figures.elements_over, 1);  // element 2: 0.5 > 0.16; element 1: 0.1 <= 0.16
  EXPECT_EQ(m.worst, 2);
  EXPECT_FLOAT_EQ(m.s_at_worst, 1e-2f);
  EXPECT_NEAR(m.figures.budget_ratio, 0.5 / (16 * double(1e-2f)), 1e-9);
  const Measurement back = Measurement::from_json(json::parse(m.to_json().dump()));
  EXPECT_EQ(back.s_at_worst, m.s_at_worst);
  EXPECT_EQ(back.figures.budget_ratio, m.figures.budget_ratio);
  const Measurement without = measure(candidate, truth, spec);
  EXPECT_EQ(without.figures.elements_over, 2);
  const Owned short_sens(DType::F32, {0.0, 1e-2});
  const TensorView short_view = short_sens.view();
  EXPECT_THROW(measure(candidate, truth, spec, &short_view), std::invalid_argument);
}

TEST(Elementwise, TheSensitivitysNormIsOverTheJudgedFinitePairsOnly) {
  // ||s|| / ||t|| over the pairs that stay finite: element 2 (a NaN truth, matched) is left
  // out of both norms, its sensitivity too.
  const Owned truth(DType::F64, {3.0, 4.0, kNaN, 0.0});
  const Owned candidate(DType::F32, {3.0, 4.0, kNaN, 0.0});
  const Owned sens(DType::F32, {0.03, 0.04, 100.0, 0.0});
  PassSpec spec;
  spec.threshold = overflow_threshold(DType::F32);
  spec.scale = 1;
  spec.tol = {1e-2, 1e-2};
  spec.sens = 16;
  const TensorView sv = sens.view();
  const Measurement m = measure(candidate, truth, spec, &sv);
  EXPECT_NEAR(m.figures.sensitivity_normwise, 0.05 / 5.0, 1e-8);  // ||(.03,.04)|| / ||(3,4)||
  // Elements 0 and 1 have their budgets opened by their sensitivity (16 x 0.03 > 0.01 x (3 + 1)),
  // element 3 (truth 0, exact) is the only one the floor decides: no error there.
  EXPECT_EQ(m.figures.normwise_conditioned, 0.0);
  // A pass that does not read it (K = 0) has none, nor one over an all-zero truth.
  PassSpec unread = spec;
  unread.sens = 0;
  EXPECT_EQ(measure(candidate, truth, unread, &sv).figures.sensitivity_normwise, 0.0);
  const Owned zeros(DType::F64, {0.0, 0.0, 0.0, 0.0});
  EXPECT_EQ(measure(candidate, zeros, spec, &sv).figures.sensitivity_normwise, 0.0);
  const Measurement back = Measurement::from_json(json::parse(m.to_json().dump()));
  EXPECT_EQ(back.figures.sensitivity_normwise, m.figures.sensitivity_normwise);
  // Element by element (the device's way) the same.
  PassPartial p = empty_partial();
  for (int64_t i = 0; i < 4; ++i) {
    accumulate(p, i, candidate.view().value_at(i), truth.view().value_at(i), sv.value_at(i), spec);
  }
  EXPECT_NEAR(finish_measurement(p, 4, spec).figures.sensitivity_normwise, 0.01, 1e-8);
  // Without a sensitivity, and in figures written before it existed: 0.
  EXPECT_EQ(measure(candidate, truth, spec).figures.sensitivity_normwise, 0.0);
  json old = m.figures.to_json();
  old.erase("sensitivity_normwise");
  EXPECT_EQ(ErrorFigures::from_json(old).sensitivity_normwise, 0.0);
}

TEST(Elementwise, NonFinitePairsAreCountedThenAddNothing) {
  const PassSpec spec{overflow_threshold(DType::F16), 1, {0.01, 0.01}, true};
  PassPartial p = empty_partial();
  accumulate(p, 3, kNaN, kNaN, 0.0, spec);   // match (nan_equal)
  accumulate(p, 5, 70000, kInf, 0.0, spec);  // both +inf in float16: match
  accumulate(p, 9, 1.0, -66000, 0.0, spec);  // -inf in float16: mismatch
  accumulate(p, 2, kInf, -kInf, 0.0, spec);  // mismatch, earlier
  EXPECT_EQ(p.nonfinite_mismatches, 2);
  EXPECT_EQ(p.first_nonfinite_mismatch, 2);
  EXPECT_EQ(p.max_abs, 0);
  EXPECT_EQ(p.diff.sum, 0);
  EXPECT_EQ(p.judged.sum, 0);
  PassSpec strict = spec;
  strict.nan_equal = false;
  PassPartial q = empty_partial();
  accumulate(q, 3, kNaN, kNaN, 0.0, strict);
  EXPECT_EQ(q.nonfinite_mismatches, 1);
}

TEST(Elementwise, SquareSumsNeitherOverflowNorVanish) {
  SquareSum big = empty_squares(), small = empty_squares();
  for (int i = 0; i < 1000; ++i) {
    add_square(big, 1e300);
    add_square(small, 1e-300);
  }
  EXPECT_NEAR(rms_of(big, 1000) / 1e300, 1.0, 1e-12);
  EXPECT_NEAR(rms_of(small, 1000) / 1e-300, 1.0, 1e-12);
  EXPECT_NEAR(norm_ratio(big, big), 1.0, 1e-15);
  EXPECT_EQ(norm_ratio(empty_squares(), big), 0);
  EXPECT_EQ(norm_ratio(big, empty_squares()), root_of(big) / kZeroFloor);
  SquareSum subnormal = empty_squares();
  add_square(subnormal, 4.9e-324);
  EXPECT_GT(subnormal.sum, 0);
  EXPECT_NEAR(root_of(subnormal) / 4.9e-324, 1.0, 1e-3);
  // Growing values rescale what was summed before.
  SquareSum mixed = empty_squares();
  add_square(mixed, 3);
  add_square(mixed, 4e10);
  add_square(mixed, 4);
  EXPECT_NEAR(root_of(mixed), std::sqrt(9 + 16e20 + 16), 1e-3);
  SquareSum overflowed = empty_squares();
  add_square(overflowed, kInf);
  EXPECT_EQ(root_of(overflowed), kInf);
  EXPECT_EQ(merge_squares(mixed, overflowed).sum, kInf);
}

// ---- JSON -----------------------------------------------------------------------------------

TEST(MeasureJson, DoublesNeverBecomeNaNOrInfinityInTheText) {
  EXPECT_EQ(encode_double(1.5), json(1.5));
  EXPECT_EQ(encode_double(kNaN), json("nan"));
  EXPECT_EQ(encode_double(kInf), json("inf"));
  EXPECT_EQ(encode_double(-kInf), json("-inf"));
  EXPECT_TRUE(std::isnan(decode_double(json("nan"))));
  EXPECT_EQ(decode_double(json("-inf")), -kInf);
  EXPECT_EQ(decode_double(json("Infinity")), kInf);
  EXPECT_EQ(decode_double(json(3)), 3.0);
  EXPECT_THROW(decode_double(json("bad")), std::invalid_argument);
  EXPECT_THROW(decode_double(json(nullptr)), std::invalid_argument);
  EXPECT_THROW(parse_double("1e999"), std::invalid_argument);
}

TEST(MeasureJson, MeasurementRoundTripsWithNaNAndInfinity) {
  Measurement m;
  m.figures = {kInf, 0.25, kNaN, 1e-300, kInf, 12, 3, 2, 0.5};
  m.worst = 7;
  m.first_nonfinite_mismatch = 2;
  m.x_at_worst = -kInf;
  m.y_at_worst = 1e308;
  m.x_at_first_nonfinite = kNaN;
  m.y_at_first_nonfinite = 5e-324;
  const std::string text = m.to_json().dump();
  EXPECT_EQ(text.find("null"), std::string::npos) << text;
  EXPECT_EQ(text.find("NaN"), std::string::npos) << text;
  const Measurement back = Measurement::from_json(json::parse(text));
  EXPECT_EQ(back.figures.max_abs, kInf);
  EXPECT_EQ(back.figures.max_rel, 0.25);
  EXPECT_TRUE(std::isnan(back.figures.normwise_rel));
  EXPECT_EQ(back.figures.worst_elem_ratio, 1e-300);
  EXPECT_EQ(back.figures.budget_ratio, kInf);
  EXPECT_EQ(back.figures.numel, 12);
  EXPECT_EQ(back.figures.elements_over, 3);
  EXPECT_EQ(back.figures.nonfinite_mismatches, 2);
  EXPECT_EQ(back.figures.scale, 0.5);
  EXPECT_EQ(back.worst, 7);
  EXPECT_EQ(back.first_nonfinite_mismatch, 2);
  EXPECT_EQ(back.x_at_worst, -kInf);
  EXPECT_EQ(back.y_at_worst, 1e308);
  EXPECT_TRUE(std::isnan(back.x_at_first_nonfinite));
  EXPECT_EQ(back.y_at_first_nonfinite, 5e-324);
  EXPECT_EQ(back.to_json().dump(), text);
}

TEST(MeasureJson, PassSpecAndBaselineRoundTrip) {
  const PassSpec spec = baseline_spec(DType::F16, 2.5);
  const json j = pass_spec_to_json(spec);
  EXPECT_EQ(j["tol_abs"], "inf");
  EXPECT_EQ(j["threshold"], 65520.0);
  const PassSpec back = pass_spec_from_json(json::parse(j.dump()));
  EXPECT_EQ(back.threshold, spec.threshold);
  EXPECT_EQ(back.scale, 2.5);
  EXPECT_EQ(back.tol.abs, kInf);
  EXPECT_EQ(back.tol.rel, 0);
  EXPECT_TRUE(back.nan_equal);
  const PassSpec exact = baseline_spec(DType::I64, 1);
  EXPECT_EQ(exact.tol.abs, 0);
  EXPECT_EQ(exact.threshold, kInf);

  const Owned reference(DType::F32, {1, kNaN, 3e38, 4}), truth(DType::F64, {1, kNaN, 1e39, 4.5});
  OutputBaseline b = describe_baseline(reference, truth);
  EXPECT_FALSE(b.truth_is_reference);
  ASSERT_TRUE(b.vs_truth.has_value());
  EXPECT_EQ(b.vs_truth->figures.nonfinite_mismatches, 1);  // 1e39 is +inf in float32
  EXPECT_EQ(b.vs_truth->first_nonfinite_mismatch, 2);
  EXPECT_NEAR(b.truth_scale, std::sqrt((1 + 4.5 * 4.5) / 2), 1e-12);
  const std::string text = b.to_json().dump();
  const OutputBaseline again = OutputBaseline::from_json(json::parse(text));
  EXPECT_EQ(again.to_json().dump(), text);
  EXPECT_EQ(again.dtype, DType::F32);
  EXPECT_EQ(again.truth_dtype, DType::F64);
  EXPECT_EQ(again.shape, std::vector<int64_t>{4});

  const OutputBaseline self = describe_baseline(reference, reference);
  EXPECT_TRUE(self.truth_is_reference);
  EXPECT_FALSE(self.vs_truth.has_value());
  EXPECT_EQ(self.reference_scale, self.truth_scale);
  EXPECT_TRUE(self.to_json()["vs_truth"].is_null());
  EXPECT_FALSE(OutputBaseline::from_json(self.to_json()).vs_truth.has_value());
}

TEST(Plan, NormBudgetFollowsTheBaselineElementBudgetIsTheFloorAndSensitivity) {
  OutputBaseline b;
  b.dtype = DType::F32;
  b.shape = {10};
  b.truth_dtype = DType::F64;
  b.truth_scale = 2;
  b.reference_scale = 3;
  b.vs_truth = Measurement{};
  b.vs_truth->figures.normwise_rel = 1e-3;
  b.vs_truth->figures.worst_elem_ratio = 5e-3;
  const CandidatePass scaled = plan_candidate_pass(b, Policy::verified());
  EXPECT_TRUE(scaled.against_truth);
  EXPECT_DOUBLE_EQ(scaled.norm_budget, 4e-3);
  // The baseline's worst element (4 x 5e-3 = 2e-2) no longer widens the elementwise budget: the
  // floor stays 1e-2 and each element's sensitivity opens it (K = 16).
  EXPECT_DOUBLE_EQ(scaled.elem_budget, 1e-2);
  EXPECT_DOUBLE_EQ(scaled.spec.tol.abs, 2e-2);
  EXPECT_DOUBLE_EQ(scaled.spec.tol.rel, 1e-2);
  EXPECT_DOUBLE_EQ(scaled.spec.sens, 16.0);
  EXPECT_EQ(scaled.spec.scale, 2);
  EXPECT_TRUE(scaled.spec.nan_equal);
  const CandidatePass allclose = plan_candidate_pass(b, Policy::allclose(1e-4, 2e-4));
  EXPECT_FALSE(allclose.against_truth);
  EXPECT_EQ(allclose.spec.scale, 3);
  EXPECT_EQ(allclose.spec.tol.abs, 1e-4);
  EXPECT_EQ(allclose.spec.tol.rel, 2e-4);
  EXPECT_FALSE(allclose.spec.nan_equal);
  const json j = scaled.to_json();
  EXPECT_EQ(j["against_truth"], true);
  EXPECT_EQ(pass_spec_from_json(j["spec"]).tol.rel, scaled.spec.tol.rel);
  EXPECT_EQ(pass_spec_from_json(j["spec"]).sens, 16.0);
  EXPECT_EQ(contract_violation(DType::F32, {10}, b), std::nullopt);
  EXPECT_EQ(contract_violation(DType::F32, {2, 5}, b),
            "shape [2, 5] differs from the reference's [10]");
}

TEST(Decide, ReasonsComeFromTheMeasuredValues) {
  // A float16 output whose truth overflows it at the worst element: the reason shows the value
  // and that it is infinite in float16, without any tensor at hand.
  OutputBaseline b;
  b.dtype = DType::F16;
  b.shape = {2, 3};
  b.truth_dtype = DType::F64;
  b.truth_scale = 1;
  b.reference_scale = 1;
  b.vs_truth = Measurement{};
  b.vs_truth->figures.numel = 6;
  const CandidatePass pass = plan_candidate_pass(b, Policy::verified());
  Measurement m;
  m.figures.numel = 6;
  m.figures.nonfinite_mismatches = 1;
  m.first_nonfinite_mismatch = 4;
  m.x_at_first_nonfinite = 65504;
  m.y_at_first_nonfinite = 70000;
  const Outcome o = decide(b, pass, m, DType::F16, Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.reason,
            "element [1, 1] is 65504 where the float64 truth is 70000 (infinite in float16) "
            "(non-finite values must match in position and kind; 1 such element)");
}

}  // namespace
}  // namespace kbv::check
