// The correctness decision: the scaled (verified) policy against TF32- and bf16-like noise, single
// wrong elements, zero outputs, non-finite values and integer ties, and the allclose policies.
// Every case is also decided through the split API (baseline, plan, measurement, decide) with
// JSON between the steps, and must come out the same.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "check/compare.hpp"

namespace kbv::check {
namespace {

using tensor::DType;
using tensor::TensorView;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A tensor that owns its bytes and lends a view of them.
class Owned {
 public:
  static Owned of(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
    Owned t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.bytes_.resize(values.size() * tensor::element_size(dtype));
    for (size_t i = 0; i < values.size(); ++i) t.store(i, values[i]);
    return t;
  }
  TensorView view() const { return {"t", dtype_, shape_, bytes_.data(), bytes_.size()}; }
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
      case DType::I64:
        return put(i, static_cast<int64_t>(v));
      case DType::I32:
        return put(i, static_cast<int32_t>(v));
      case DType::Bool:
        return put(i, static_cast<uint8_t>(v != 0));
      case DType::F16:  // fp16 tensors here are given as raw bits
        return put(i, static_cast<uint16_t>(v));
      default:
        FAIL() << "unsupported in this helper";
    }
  }

  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::vector<std::byte> bytes_;
};

Owned f64(std::vector<int64_t> shape, const std::vector<double>& v) {
  return Owned::of(DType::F64, std::move(shape), v);
}
Owned f32(std::vector<int64_t> shape, const std::vector<double>& v) {
  return Owned::of(DType::F32, std::move(shape), v);
}

std::vector<double> randn(size_t n, uint32_t seed, double scale = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

double rms(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x * x;
  return std::sqrt(s / double(v.size()));
}

// truth plus Gaussian noise of the given normwise relative size.
std::vector<double> noisy(const std::vector<double>& truth, double relative, uint32_t seed) {
  const auto noise = randn(truth.size(), seed, relative * rms(truth));
  std::vector<double> out(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) out[i] = truth[i] + noise[i];
  return out;
}

// compare(), checked against the same decision reached the way the orchestrator reaches it: the
// reference's baseline, the planned pass and the candidate's measurement each cross a JSON
// channel, and the policy plans and decides on figures alone. Both must give the same outcome.
Outcome judged(const TensorView& candidate, const TensorView& reference, const TensorView& truth,
               const Policy& policy, const TensorView* sensitivity = nullptr) {
  const Outcome direct = compare(candidate, reference, truth, policy, sensitivity);
  const auto relay = [](const nlohmann::json& j) { return nlohmann::json::parse(j.dump()); };
  // The reference worker's description: the baseline, measured against its candidates' budget.
  OutputBaseline described = describe_baseline(reference, truth);
  measure_baseline_budget(described, Policy::from_json(relay(policy.to_json())),
                          [&](const PassSpec& spec) {
                            return Measurement::from_json(
                                relay(measure(reference, truth, spec, sensitivity).to_json()));
                          });
  const OutputBaseline baseline = OutputBaseline::from_json(relay(described.to_json()));
  Outcome split;
  if (auto violation = contract_violation(candidate.dtype, candidate.shape, baseline)) {
    split.reason = *violation;
  } else {
    const CandidatePass pass = plan_candidate_pass(baseline, policy);
    const PassSpec spec = pass_spec_from_json(relay(pass.to_json())["spec"]);
    const Measurement m = Measurement::from_json(
        relay((pass.against_truth ? measure(candidate, truth, spec, sensitivity)
                                  : measure(candidate, reference, spec))
                  .to_json()));
    split = decide(baseline, pass, m, candidate.dtype, policy);
  }
  EXPECT_EQ(direct.to_json().dump(), split.to_json().dump());
  return direct;
}

bool contains(const std::string& s, const std::string& fragment) {
  return s.find(fragment) != std::string::npos;
}

// A 100 x 1000 float32 problem with a float64 truth and a TF32-like baseline.
class ScaledTest : public ::testing::Test {
 protected:
  const std::vector<int64_t> shape{100, 1000};
  const std::vector<double> truth_values = randn(100000, 1);
  const Owned truth = f64(shape, truth_values);
  const Owned reference = f32(shape, noisy(truth_values, 3e-4, 2));

  Outcome judge(const std::vector<double>& candidate) const {
    return judged(f32(shape, candidate), reference, truth, Policy::verified());
  }
};

TEST_F(ScaledTest, ExactFp32Passes) {
  const Outcome o = judge(truth_values);
  EXPECT_TRUE(o.passed) << o.reason;
  EXPECT_TRUE(o.reason.empty());
  EXPECT_LT(o.candidate.normwise_rel, 1e-7);
  EXPECT_EQ(o.candidate.numel, 100000);
  EXPECT_NEAR(o.candidate.scale, 1.0, 0.01);
  ASSERT_TRUE(o.baseline.has_value());
  EXPECT_NEAR(o.baseline->normwise_rel, 3e-4, 1e-5);
  EXPECT_NEAR(o.norm_budget, 4 * o.baseline->normwise_rel, 1e-12);
  EXPECT_EQ(o.elem_budget, 1e-2);  // the baseline's worst ratio x4 is below the floor
}

TEST_F(ScaledTest, Tf32LikeNoisePasses) {
  const Outcome o = judge(noisy(truth_values, 3e-4, 3));
  EXPECT_TRUE(o.passed) << o.reason;
  EXPECT_NEAR(o.candidate.normwise_rel, 3e-4, 1e-5);
}

TEST_F(ScaledTest, Bf16LikeNoiseFails) {
  const Outcome o = judge(noisy(truth_values, 4e-3, 3));
  EXPECT_FALSE(o.passed);
  EXPECT_TRUE(contains(o.reason, "normwise relative error")) << o.reason;
  EXPECT_NEAR(o.candidate.normwise_rel, 4e-3, 1e-4);
}

TEST_F(ScaledTest, OneWrongElementFailsElementwise) {
  std::vector<double> candidate = truth_values;
  const size_t i = 37 * 1000 + 512;
  // 10% of the element's scale: invisible normwise (~6e-4 over 1e5 elements), caught elementwise.
  candidate[i] += 0.1 * (std::abs(truth_values[i]) + rms(truth_values));
  const Outcome o = judge(candidate);
  EXPECT_FALSE(o.passed);
  EXPECT_LT(o.candidate.normwise_rel, o.norm_budget);
  EXPECT_EQ(o.candidate.elements_over, 1);
  EXPECT_NEAR(o.candidate.worst_elem_ratio, 0.1, 1e-5);
  EXPECT_TRUE(contains(o.reason, "element [37, 512] is")) << o.reason;
  EXPECT_TRUE(contains(o.reason, "the float64 truth")) << o.reason;
  EXPECT_TRUE(contains(o.reason, "1 of 100000 elements over budget")) << o.reason;
}

TEST_F(ScaledTest, BudgetGrowsWithANoisierBaseline) {
  const auto candidate = noisy(truth_values, 2e-3, 3);
  EXPECT_FALSE(judge(candidate).passed);

  const Owned noisier = f32(shape, noisy(truth_values, 1e-3, 2));
  const Outcome o = judged(f32(shape, candidate), noisier, truth, Policy::verified());
  EXPECT_TRUE(o.passed) << o.reason;
  EXPECT_NEAR(o.norm_budget, 4e-3, 1e-4);
  EXPECT_GT(o.norm_budget, judge(candidate).norm_budget);

  // Not elementwise: a baseline whose worst element is 5% off does not raise every element's
  // budget (that maximum is heavy-tailed and moved from draw to draw); the floor stays 1e-2. A
  // baseline within its budget admits nothing: a candidate 3% off at one element fails.
  auto off = truth_values;
  off[9] += 0.03 * (std::abs(off[9]) + rms(truth_values));
  const Outcome within = judged(f32(shape, off), reference, truth, Policy::verified());
  EXPECT_EQ(within.elem_budget, 1e-2);
  EXPECT_FALSE(within.passed);
  EXPECT_NEAR(*within.elem_margin, 3.0, 1e-3);
  EXPECT_FALSE(within.reference_vs_budget.has_value());
}

// Protocol version 3: the TF32 reference is admissible by definition. Where it is itself over the
// elementwise budget (here: 5% off at one element, 5x its budget), a candidate may be over too,
// within 4x the reference's own excess (4 elements, none beyond 20x); where it is within its
// budget, nothing changes (the test above).
TEST_F(ScaledTest, TheReferencesOwnExcessIsAdmittedUpTo4x) {
  const double scale = rms(truth_values);
  auto spiky_values = truth_values;
  spiky_values[7] += 0.05 * (std::abs(spiky_values[7]) + scale);
  const Owned spiky = f32(shape, spiky_values);
  const auto with_off = [&](std::vector<size_t> at, double relative) {
    auto v = truth_values;
    for (const size_t i : at) v[i] += relative * (std::abs(v[i]) + scale);
    return judged(f32(shape, v), spiky, truth, Policy::verified());
  };
  // The reference itself (a copy): passes, and says why.
  const Outcome copy = judged(spiky, spiky, truth, Policy::verified());
  EXPECT_TRUE(copy.passed) << copy.reason;
  EXPECT_TRUE(contains(copy.reason, "within the reference's own excess")) << copy.reason;
  EXPECT_TRUE(contains(copy.reason, "1 element over budget, worst 5x")) << copy.reason;
  ASSERT_TRUE(copy.reference_vs_budget.has_value());
  EXPECT_EQ(copy.reference_vs_budget->elements_over, 1);
  EXPECT_NEAR(copy.reference_vs_budget->budget_ratio, 5.0, 1e-3);
  EXPECT_NEAR(*copy.elem_margin, 0.25, 1e-3);  // one of 4 elements, 5x of 20x
  EXPECT_EQ(copy.to_json()["reference_vs_budget"]["elements_over"], 1);
  // Elsewhere and of a like size: admitted.
  const Outcome like = with_off({9, 10, 11, 12}, 0.06);
  EXPECT_TRUE(like.passed) << like.reason;
  EXPECT_NEAR(*like.elem_margin, 1.0, 1e-3);  // 4 of 4 elements
  // More elements than 4x the reference's, or one further than 4x its worst: rejected.
  const Outcome more = with_off({9, 10, 11, 12, 13}, 0.03);
  EXPECT_FALSE(more.passed);
  EXPECT_TRUE(contains(more.reason, "beyond the reference's own excess")) << more.reason;
  EXPECT_TRUE(contains(more.reason, "up to 4 over, none beyond 20x")) << more.reason;
  EXPECT_NEAR(*more.elem_margin, 5.0 / 4.0, 1e-3);
  const Outcome further = with_off({9}, 0.25);
  EXPECT_FALSE(further.passed);
  EXPECT_NEAR(*further.elem_margin, 25.0 / 20.0, 1e-3);
  // The normwise rule is untouched: noise of bf16's size fails beside the spiky reference too.
  EXPECT_FALSE(
      judged(f32(shape, noisy(truth_values, 4e-3, 3)), spiky, truth, Policy::verified()).passed);
  // Version 2's rule (no admission): the reference's own copy fails.
  Policy v2 = Policy::verified();
  v2.admit_reference_excess = false;
  const Outcome strict = judged(spiky, spiky, truth, v2);
  EXPECT_FALSE(strict.passed);
  EXPECT_TRUE(contains(strict.reason, "element [0, 7] is")) << strict.reason;
}

TEST(Policy, JsonRoundTrip) {
  const Policy p = Policy::verified();
  EXPECT_EQ(Policy::from_json(p.to_json()).to_json(), p.to_json());
  EXPECT_TRUE(Policy::from_json(p.to_json()).admit_reference_excess);
  const Policy a = Policy::allclose(1e-4, 2e-4);
  EXPECT_EQ(Policy::from_json(a.to_json()).to_json(), a.to_json());
  EXPECT_THROW(Policy::from_json({{"kind", "nonsense"}}), std::invalid_argument);
}

// The sensitivity operand opens the budget of the elements it names, and only there: an
// element 10% off passes where its sensitivity is 1% of its scale (K = 16), fails where it is
// 0.1%, and the reason says the budget came from the sensitivity.
TEST_F(ScaledTest, SensitivityOpensIllConditionedElementsOnly) {
  const double scale = rms(truth_values);
  std::vector<double> sens(truth_values.size(), 0.0);
  sens[11] = 0.01 * (std::abs(truth_values[11]) + scale);
  sens[12] = 0.001 * (std::abs(truth_values[12]) + scale);
  const Owned s = f32(shape, sens);
  const TensorView sv = s.view();
  std::vector<double> candidate = truth_values;
  candidate[11] += 0.1 * (std::abs(truth_values[11]) + scale);
  const Outcome opened = judged(f32(shape, candidate), reference, truth, Policy::verified(), &sv);
  EXPECT_TRUE(opened.passed) << opened.reason;
  EXPECT_NEAR(*opened.elem_margin, 0.1 / 0.16, 1e-3);
  EXPECT_FALSE(judge(candidate).passed);  // the floor alone rejects it
  candidate[12] += 0.1 * (std::abs(truth_values[12]) + scale);
  const Outcome o = judged(f32(shape, candidate), reference, truth, Policy::verified(), &sv);
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.candidate.elements_over, 1);
  EXPECT_TRUE(contains(o.reason, "element [0, 12] is")) << o.reason;
  EXPECT_TRUE(contains(o.reason, "from the element's rounding sensitivity")) << o.reason;
  // Allclose never reads it.
  const Outcome allclose =
      judged(f32(shape, candidate), reference, truth, Policy::allclose(1e-4, 1e-4), &sv);
  EXPECT_FALSE(allclose.passed);
}

TEST_F(ScaledTest, TheSensitivitysNormOpensTheNormwiseBudget) {
  // Protocol version 4: norm budget = max(floor, 4 x baseline, 1.5 x ||s|| / ||t||), and where
  // the last term is the larger, the elements the sensitivity does not open keep max(floor,
  // 4 x baseline) over their own norm. The first 10,000 elements are ill-conditioned (terms
  // that cancel: s_i = 0.05 at outputs of scale 1); the rest are not (s_i = 3e-4 |t_i|).
  const size_t ill = 10000;
  std::vector<double> sens(truth_values.size());
  for (size_t i = 0; i < sens.size(); ++i) {
    sens[i] = i < ill ? 0.05 : 3e-4 * std::abs(truth_values[i]);
  }
  const Owned s = f32(shape, sens);
  const TensorView sv = s.view();
  const auto with_sensitivity = [&](const std::vector<double>& c, const Policy& policy) {
    return judged(f32(shape, c), reference, truth, policy, &sv);
  };
  // Errors of 0.4 s_i (an honest kernel of the precision class; bench/sensitivity_calibration.py)
  // times `factor`, on the elements from `first` on.
  const auto rounding = [&](double factor, size_t first) {
    std::vector<double> c = truth_values;
    const std::vector<double> z = randn(c.size(), 17);
    for (size_t i = first; i < c.size(); ++i) c[i] += factor * 0.4 * sens[i] * z[i];
    return c;
  };
  const std::vector<double> honest = rounding(1, 0);
  EXPECT_FALSE(judge(honest).passed);  // without the sensitivity: over the floor (6e-3 or so)
  const Outcome o = with_sensitivity(honest, Policy::verified());
  EXPECT_TRUE(o.passed) << o.reason;
  const double sigma = o.candidate.sensitivity_normwise;
  EXPECT_NEAR(sigma, 0.05 * std::sqrt(double(ill)) / (rms(truth_values) * std::sqrt(1e5)), 1e-3);
  EXPECT_NEAR(o.norm_budget, 1.5 * sigma, 1e-9);
  EXPECT_LT(*o.norm_margin, 0.35);
  EXPECT_LT(o.candidate.normwise_conditioned, 2e-4);
  // Eight times the rounding (bfloat16 against TF32): over it, and the reason says why.
  const Outcome bf16 = with_sensitivity(rounding(8, 0), Policy::verified());
  EXPECT_FALSE(bf16.passed);
  EXPECT_TRUE(contains(bf16.reason, "normwise relative error")) << bf16.reason;
  EXPECT_TRUE(contains(bf16.reason, "1.5 x the rounding sensitivity's")) << bf16.reason;
  // Exact where the terms cancel, 0.3% off everywhere else: within the elementwise floor and
  // the opened normwise budget, but the well-conditioned elements keep their own.
  std::vector<double> sloppy = truth_values;
  const std::vector<double> z = randn(sloppy.size(), 19);
  for (size_t i = ill; i < sloppy.size(); ++i) sloppy[i] *= 1 + 3e-3 * z[i];
  const Outcome loose = with_sensitivity(sloppy, Policy::verified());
  EXPECT_FALSE(loose.passed);
  EXPECT_LT(loose.candidate.normwise_rel, loose.norm_budget);
  EXPECT_EQ(loose.candidate.elements_over, 0);
  EXPECT_TRUE(contains(loose.reason, "over the elements whose rounding sensitivity does not open"))
      << loose.reason;
  EXPECT_GT(*loose.norm_margin, 1.0);
  // A policy of version 3 (no such term, as read from its JSON) keeps the old budget.
  nlohmann::json v3 = Policy::verified().to_json();
  v3.erase("sens_norm_multiplier");
  const Policy old = Policy::from_json(v3);
  EXPECT_EQ(old.sens_norm_multiplier, 0.0);
  EXPECT_FALSE(with_sensitivity(honest, old).passed);
  EXPECT_EQ(Policy::from_json(Policy::verified().to_json()).sens_norm_multiplier, 1.5);
}

// Protocol version 5: the well-conditioned elements' budget over their own norm follows the
// reference's own error over those elements. An output of a wide dynamic range (Mamba2's final
// state): 10,000 large elements of scale 1000 whose sensitivity opens their budget, the rest of
// scale 1 with none. The TF32 reference is 1e-4 off on the large ones and 2e-3 off on the small
// ones: 1e-4 over the whole output, 2e-3 over the small elements, above the floor of 1e-3.
TEST(ConditionedBudget, FollowsTheReferencesOwnErrorOverTheSameElements) {
  const std::vector<int64_t> shape{100, 1000};
  const size_t n = 100000, large = 10000;
  std::vector<double> truth_values = randn(n, 31), sens(n, 0.0);
  for (size_t i = 0; i < large; ++i) {
    truth_values[i] *= 1000;
    sens[i] = 0.01 * std::abs(truth_values[i]);
  }
  // Each element off by `large_rel` (the large ones) or `small_rel` (the rest) of itself.
  const auto off = [&](double large_rel, double small_rel, uint32_t seed) {
    std::vector<double> v = truth_values;
    const std::vector<double> z = randn(n, seed);
    for (size_t i = 0; i < n; ++i) v[i] *= 1 + (i < large ? large_rel : small_rel) * z[i];
    return v;
  };
  const Owned truth = f64(shape, truth_values), s = f32(shape, sens);
  const Owned reference = f32(shape, off(1e-4, 2e-3, 5));
  const TensorView sv = s.view();
  const auto with = [&](const std::vector<double>& c, const Policy& policy) {
    return judged(f32(shape, c), reference, truth, policy, &sv);
  };
  Policy v4 = Policy::verified();
  v4.conditioned_budget_by_reference = false;
  // The reference's own copy: failed version 4's rule, passes now.
  const Outcome own_v4 = judged(reference, reference, truth, v4, &sv);
  EXPECT_FALSE(own_v4.passed);
  EXPECT_TRUE(contains(own_v4.reason, "over the elements whose rounding sensitivity"))
      << own_v4.reason;
  const Outcome own = judged(reference, reference, truth, Policy::verified(), &sv);
  EXPECT_TRUE(own.passed) << own.reason;
  ASSERT_TRUE(own.norm_budget_conditioned.has_value());
  // (about 2e-3: the large elements near zero are within the floor as well, 1e-4 off)
  EXPECT_GT(own.candidate.normwise_conditioned, 1.5e-3);
  EXPECT_LT(own.candidate.normwise_conditioned, 2.1e-3);
  EXPECT_NEAR(*own.norm_budget_conditioned, 4 * own.candidate.normwise_conditioned, 1e-9);
  EXPECT_LE(*own.norm_margin, 0.3);
  // An honest kernel of the reference's class (other rounding, same size) passes too.
  EXPECT_TRUE(with(off(1e-4, 2e-3, 6), Policy::verified()).passed);
  // A kernel 3% off on every small element (within the elementwise floor there, whose absolute
  // part follows the large elements' scale, and far within the opened normwise budget) fails:
  // 15x the reference over those elements.
  const Outcome sloppy = with(off(1e-4, 3e-2, 7), Policy::verified());
  EXPECT_FALSE(sloppy.passed);
  EXPECT_EQ(sloppy.candidate.elements_over, 0);
  EXPECT_LT(sloppy.candidate.normwise_rel, sloppy.norm_budget);
  EXPECT_TRUE(contains(sloppy.reason, fmt::format("4 x its {:.3g} over those elements",
                                                  own.candidate.normwise_conditioned)))
      << sloppy.reason;
  EXPECT_GT(*sloppy.norm_margin, 3.0);
  // The rule from a policy's JSON: absent (written before version 5), version 4's.
  nlohmann::json old = Policy::verified().to_json();
  old.erase("conditioned_budget_by_reference");
  EXPECT_FALSE(Policy::from_json(old).conditioned_budget_by_reference);
  EXPECT_TRUE(Policy::from_json(Policy::verified().to_json()).conditioned_budget_by_reference);
}

TEST_F(ScaledTest, MarginsSayHowCloseAVerdictWas) {
  // Exact: far inside both budgets.
  const Outcome exact = judge(truth_values);
  ASSERT_TRUE(exact.elem_margin && exact.norm_margin);
  EXPECT_LT(*exact.elem_margin, 1e-4);
  EXPECT_LT(*exact.norm_margin, 1e-3);
  // One element 0.5% off, half its budget of 1e-2: elementwise margin 0.5, and it passes.
  std::vector<double> half = truth_values;
  half[11] += 0.005 * (std::abs(truth_values[11]) + rms(truth_values));
  const Outcome near = judge(half);
  EXPECT_TRUE(near.passed) << near.reason;
  EXPECT_NEAR(*near.elem_margin, 0.5, 1e-3);
  // Twice the budget: margin 2, failed; the JSON carries both margins.
  std::vector<double> twice = truth_values;
  twice[11] += 0.02 * (std::abs(truth_values[11]) + rms(truth_values));
  const Outcome over = judge(twice);
  EXPECT_FALSE(over.passed);
  EXPECT_NEAR(*over.elem_margin, 2.0, 1e-3);
  EXPECT_NEAR(over.to_json()["margins"]["elementwise"].get<double>(), 2.0, 1e-3);
  EXPECT_TRUE(over.to_json()["margins"].contains("normwise"));
  // Bf16-like noise: over the normwise budget.
  EXPECT_GT(*judge(noisy(truth_values, 4e-3, 3)).norm_margin, 1.0);
}

TEST(AllClose, HasNoMargins) {
  const auto t = randn(100, 9);
  const Outcome o =
      judged(f32({100}, t), f32({100}, t), f64({100}, t), Policy::allclose(1e-4, 1e-4));
  EXPECT_FALSE(o.elem_margin.has_value());
  EXPECT_FALSE(o.to_json().contains("margins"));
}

TEST_F(ScaledTest, ReportsJson) {
  const Outcome o = judge(truth_values);
  const auto j = o.to_json();
  EXPECT_EQ(j["passed"], true);
  EXPECT_EQ(j["candidate"]["numel"], 100000);
  EXPECT_TRUE(j["baseline"].contains("normwise_rel"));
  EXPECT_EQ(j["elem_budget"], 1e-2);
  const auto p = Policy::verified().to_json();
  EXPECT_EQ(p["kind"], "scaled");
  EXPECT_EQ(p["baseline_multiplier"], 4.0);
  EXPECT_EQ(p["sens_multiplier"], 16.0);
  EXPECT_EQ(Policy::allclose(1e-3, 1e-3).to_json()["kind"], "allclose");
}

TEST(Scaled, AllZeroCandidateFailsASmallValuedProblem) {
  const auto t = randn(1000, 4, 1e-6);
  const Outcome o = judged(f32({1000}, std::vector<double>(1000, 0.0)), f32({1000}, t),
                           f64({1000}, t), Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_NEAR(o.candidate.normwise_rel, 1.0, 1e-6);
}

TEST(Scaled, AllZeroTruthAcceptsOnlyZero) {
  const std::vector<double> zeros(64, 0.0);
  const Owned truth = f64({8, 8}, zeros), reference = f32({8, 8}, zeros);
  const Outcome o = judged(f32({8, 8}, zeros), reference, truth, Policy::verified());
  EXPECT_TRUE(o.passed) << o.reason;
  EXPECT_EQ(o.candidate.scale, 0.0);

  std::vector<double> tiny = zeros;
  tiny[9] = 1e-20;
  const Outcome bad = judged(f32({8, 8}, tiny), reference, truth, Policy::verified());
  EXPECT_FALSE(bad.passed);
}

TEST(Scaled, NaNPositionMismatchFails) {
  const Owned truth = f64({2, 4}, {1, 2, 3, 4, kNaN, 6, 7, 8});
  const Outcome o = judged(f32({2, 4}, {1, 2, 3, 4, 5, kNaN, 7, 8}),
                           f32({2, 4}, {1, 2, 3, 4, kNaN, 6, 7, 8}), truth, Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.candidate.nonfinite_mismatches, 2);
  EXPECT_TRUE(contains(o.reason, "element [1, 0] is 5 where the float64 truth is nan")) << o.reason;
  EXPECT_TRUE(contains(o.reason, "2 such elements")) << o.reason;
}

TEST(Scaled, MatchingNaNAndInfPass) {
  const std::vector<double> v{1, kNaN, kInf, -kInf, 5};
  const Outcome o = judged(f32({5}, v), f32({5}, v), f64({5}, v), Policy::verified());
  EXPECT_TRUE(o.passed) << o.reason;
  EXPECT_EQ(o.candidate.nonfinite_mismatches, 0);
  EXPECT_EQ(o.candidate.numel, 5);
}

TEST(Scaled, InfinitySignMustMatch) {
  const std::vector<double> v{1, kInf, 3};
  const Outcome o = judged(f32({3}, {1, -kInf, 3}), f32({3}, v), f64({3}, v), Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_TRUE(contains(o.reason, "element [1] is -inf where the float64 truth is inf")) << o.reason;
}

TEST(Scaled, TruthIsCastToTheOutputDtype) {
  // 1e39 is finite in float64 but infinite in float32: a float32 output must say +inf there.
  const Owned truth = f64({3}, {1, 1e39, 2});
  const Owned reference = f32({3}, {1, kInf, 2});
  EXPECT_TRUE(judged(f32({3}, {1, kInf, 2}), reference, truth, Policy::verified()).passed);
  const Outcome o = judged(f32({3}, {1, 3.4e38, 2}), reference, truth, Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_TRUE(contains(o.reason, "1e+39 (infinite in float32)")) << o.reason;
}

TEST(Scaled, HugeValuesDoNotOverflowTheNorms) {
  std::vector<double> t = randn(1000, 5, 1e200), c = t;
  c[0] *= 1 + 1e-6;
  const Outcome o = judged(f64({1000}, c), f64({1000}, t), f64({1000}, t), Policy::verified());
  EXPECT_TRUE(o.passed) << o.reason;
  EXPECT_TRUE(std::isfinite(o.candidate.normwise_rel));
  EXPECT_GT(o.candidate.normwise_rel, 0);
  std::vector<double> unscaled(t.size());
  for (size_t i = 0; i < t.size(); ++i) unscaled[i] = t[i] / 1e200;
  // ||t|| = 1e200 * ||t / 1e200||, which does not overflow when written this way.
  const double expected = 1e-6 * (std::abs(t[0]) / 1e200) / (rms(unscaled) * std::sqrt(1000.0));
  EXPECT_NEAR(o.candidate.normwise_rel / expected, 1.0, 1e-6);
}

TEST(Scaled, WithoutAFloat64RunTheFloorsApply) {
  const auto t = randn(1000, 6);
  const Owned reference = f32({1000}, t);
  const Outcome o =
      judged(f32({1000}, noisy(t, 5e-4, 7)), reference, reference, Policy::verified());
  EXPECT_TRUE(o.passed) << o.reason;
  EXPECT_EQ(o.norm_budget, 1e-3);
  EXPECT_EQ(o.elem_budget, 1e-2);
  const Outcome bad =
      judged(f32({1000}, noisy(t, 3e-3, 7)), reference, reference, Policy::verified());
  EXPECT_FALSE(bad.passed);
}

TEST(Scaled, ScalarOutputIsNamed) {
  const Outcome o = judged(f32({}, {2}), f32({}, {1}), f64({}, {1}), Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_TRUE(contains(o.reason, "normwise")) << o.reason;
  Policy elementwise_only = Policy::verified();
  elementwise_only.norm_floor = 10;
  const Outcome e = judged(f32({}, {2}), f32({}, {1}), f64({}, {1}), elementwise_only);
  EXPECT_TRUE(contains(e.reason, "the scalar output is 2 where the float64 truth is 1"))
      << e.reason;
}

TEST(Contract, ShapeMismatchFails) {
  const std::vector<double> v(32, 1.0);
  const Outcome o = judged(f32({4, 8}, v), f32({8, 4}, v), f64({8, 4}, v), Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.reason, "shape [4, 8] differs from the reference's [8, 4]");
}

TEST(Contract, DtypeMismatchFails) {
  const Outcome o = judged(Owned::of(DType::F16, {2}, {0x3C00, 0x3C00}), f32({2}, {1, 1}),
                           f64({2}, {1, 1}), Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.reason, "dtype float16 differs from the reference's float32");
  // Even under allclose, where torch would broadcast and upcast.
  EXPECT_FALSE(
      judged(f64({2}, {1, 1}), f32({2}, {1, 1}), f64({2}, {1, 1}), Policy::allclose(1e-3, 1e-3))
          .passed);
}

TEST(Contract, TruthOfAnotherShapeIsAHarnessBug) {
  const std::vector<double> v(4, 1.0);
  EXPECT_THROW(judged(f32({4}, v), f32({4}, v), f64({2, 2}, v), Policy::verified()),
               std::invalid_argument);
}

TEST(AllClose, FollowsTorchAllclose) {
  const Owned reference = f32({3}, {1, -2, 0});
  const Policy standard = Policy::allclose(1e-4, 1e-4);
  EXPECT_TRUE(
      judged(f32({3}, {1 + 1.9e-4, -2 - 2.9e-4, 0.9e-4}), reference, reference, standard).passed);
  const Outcome o = judged(f32({3}, {1, -2, 1.2e-4}), reference, reference, standard);
  EXPECT_FALSE(o.passed);
  EXPECT_EQ(o.candidate.elements_over, 1);
  EXPECT_TRUE(contains(o.reason, "element [2] is 0.00012 where the reference is 0")) << o.reason;
  EXPECT_FALSE(o.baseline.has_value());
}

TEST(AllClose, AnyNaNFailsAndInfinitiesMustMatch) {
  const Policy p = Policy::allclose(1e-3, 1e-3);
  const Owned with_nan = f32({2}, {1, kNaN});
  const Outcome o = judged(with_nan, with_nan, with_nan, p);
  EXPECT_FALSE(o.passed);
  EXPECT_TRUE(contains(o.reason, "allclose fails on any NaN")) << o.reason;
  const Owned with_inf = f32({2}, {1, -kInf});
  EXPECT_TRUE(judged(with_inf, with_inf, with_inf, p).passed);
  EXPECT_FALSE(judged(f32({2}, {1, kInf}), with_inf, with_inf, p).passed);
}

TEST(AllClose, FixedTolerancesFailAnExactCandidateAgainstTf32) {
  // MEASURED.md: an exact-FP32 candidate fails allclose(1e-4) against a TF32 reference on most
  // elements, and passes the scaled policy.
  const auto t = randn(10000, 8);
  const Owned truth = f64({10000}, t), tf32 = f32({10000}, noisy(t, 3e-4, 9));
  const Owned exact = f32({10000}, t);
  EXPECT_FALSE(judged(exact, tf32, truth, Policy::allclose(1e-4, 1e-4)).passed);
  EXPECT_TRUE(judged(exact, tf32, truth, Policy::verified()).passed);
}

TEST(Integer, MustMatchExactly) {
  const Owned truth = Owned::of(DType::I64, {2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_TRUE(judged(truth, truth, truth, Policy::verified()).passed);
  const Outcome o =
      judged(Owned::of(DType::I64, {2, 3}, {0, 1, 2, 3, 9, 5}), truth, truth, Policy::verified());
  EXPECT_FALSE(o.passed);
  EXPECT_TRUE(contains(o.reason, "element [1, 1] is 9 where the reference is 4")) << o.reason;
  EXPECT_TRUE(contains(o.reason, "int64 output must match exactly")) << o.reason;
}

TEST(Integer, TiesResolvedDifferentlyInFloat64AreAllowed) {
  // argmax over rows with ties: the float64 run picks index 1 where the reference picked 0, twice.
  const Owned truth = Owned::of(DType::I64, {6}, {1, 1, 2, 0, 3, 1});
  const Owned reference = Owned::of(DType::I64, {6}, {0, 0, 2, 0, 3, 1});
  const Outcome same_as_reference = judged(reference, reference, truth, Policy::verified());
  EXPECT_TRUE(same_as_reference.passed) << same_as_reference.reason;
  EXPECT_TRUE(contains(same_as_reference.reason, "ties")) << same_as_reference.reason;
  EXPECT_EQ(same_as_reference.baseline->elements_over, 2);

  const Outcome three_off =
      judged(Owned::of(DType::I64, {6}, {0, 0, 2, 0, 3, 0}), reference, truth, Policy::verified());
  EXPECT_FALSE(three_off.passed);
  EXPECT_TRUE(contains(three_off.reason, "3 of 6 elements differ, more than the 2"))
      << three_off.reason;
}

TEST(Integer, BoolOutputs) {
  const Owned truth = Owned::of(DType::Bool, {4}, {1, 0, 1, 1});
  EXPECT_TRUE(judged(truth, truth, truth, Policy::verified()).passed);
  EXPECT_FALSE(
      judged(Owned::of(DType::Bool, {4}, {1, 1, 1, 1}), truth, truth, Policy::verified()).passed);
}

}  // namespace
}  // namespace kbv::check
