#include "check/measure.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/view.hpp"

namespace kbv::check {

using nlohmann::json;
using tensor::TensorView;

// ---- doubles in JSON ------------------------------------------------------------------------

json encode_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double parse_double(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (lower == "inf" || lower == "+inf" || lower == "infinity") return kInfinity;
  if (lower == "-inf" || lower == "-infinity") return -kInfinity;
  char* end = nullptr;
  const double v = std::strtod(lower.c_str(), &end);
  if (lower.empty() || end != lower.c_str() + lower.size() || !std::isfinite(v)) {
    throw std::invalid_argument("not a number: '" + std::string(text) + "'");
  }
  return v;
}

double decode_double(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return parse_double(j.get_ref<const std::string&>());
  throw std::invalid_argument("expected a number or \"nan\"/\"inf\"/\"-inf\", got " + j.dump());
}

// ---- JSON of the figures --------------------------------------------------------------------

json ErrorFigures::to_json() const {
  return {{"max_abs", encode_double(max_abs)},
          {"max_rel", encode_double(max_rel)},
          {"normwise_rel", encode_double(normwise_rel)},
          {"sensitivity_normwise", encode_double(sensitivity_normwise)},
          {"normwise_conditioned", encode_double(normwise_conditioned)},
          {"worst_elem_ratio", encode_double(worst_elem_ratio)},
          {"budget_ratio", encode_double(budget_ratio)},
          {"numel", numel},
          {"elements_over", elements_over},
          {"nonfinite_mismatches", nonfinite_mismatches},
          {"scale", encode_double(scale)}};
}

ErrorFigures ErrorFigures::from_json(const json& j) {
  ErrorFigures f;
  f.max_abs = decode_double(j.at("max_abs"));
  f.max_rel = decode_double(j.at("max_rel"));
  f.normwise_rel = decode_double(j.at("normwise_rel"));
  f.worst_elem_ratio = decode_double(j.at("worst_elem_ratio"));
  // Absent from the figures of results recorded before protocol version 4.
  f.sensitivity_normwise =
      j.contains("sensitivity_normwise") ? decode_double(j.at("sensitivity_normwise")) : 0.0;
  f.normwise_conditioned =
      j.contains("normwise_conditioned") ? decode_double(j.at("normwise_conditioned")) : 0.0;
  // Absent from the figures of results recorded before the sensitivity budget.
  f.budget_ratio = j.contains("budget_ratio") ? decode_double(j.at("budget_ratio")) : 0.0;
  f.numel = j.at("numel").get<int64_t>();
  f.elements_over = j.at("elements_over").get<int64_t>();
  f.nonfinite_mismatches = j.at("nonfinite_mismatches").get<int64_t>();
  f.scale = decode_double(j.at("scale"));
  return f;
}

json Measurement::to_json() const {
  return {{"figures", figures.to_json()},
          {"worst", worst},
          {"first_nonfinite_mismatch", first_nonfinite_mismatch},
          {"x_at_worst", encode_double(x_at_worst)},
          {"y_at_worst", encode_double(y_at_worst)},
          {"s_at_worst", encode_double(s_at_worst)},
          {"x_at_first_nonfinite", encode_double(x_at_first_nonfinite)},
          {"y_at_first_nonfinite", encode_double(y_at_first_nonfinite)}};
}

Measurement Measurement::from_json(const json& j) {
  Measurement m;
  m.figures = ErrorFigures::from_json(j.at("figures"));
  m.worst = j.at("worst").get<int64_t>();
  m.first_nonfinite_mismatch = j.at("first_nonfinite_mismatch").get<int64_t>();
  m.x_at_worst = decode_double(j.at("x_at_worst"));
  m.y_at_worst = decode_double(j.at("y_at_worst"));
  m.s_at_worst = j.contains("s_at_worst") ? decode_double(j.at("s_at_worst")) : 0.0;
  m.x_at_first_nonfinite = decode_double(j.at("x_at_first_nonfinite"));
  m.y_at_first_nonfinite = decode_double(j.at("y_at_first_nonfinite"));
  return m;
}

json pass_spec_to_json(const PassSpec& spec) {
  return {{"threshold", encode_double(spec.threshold)},
          {"scale", encode_double(spec.scale)},
          {"tol_abs", encode_double(spec.tol.abs)},
          {"tol_rel", encode_double(spec.tol.rel)},
          {"nan_equal", spec.nan_equal},
          {"sens", encode_double(spec.sens)}};
}

PassSpec pass_spec_from_json(const json& j) {
  PassSpec spec;
  spec.threshold = decode_double(j.at("threshold"));
  spec.scale = decode_double(j.at("scale"));
  spec.tol.abs = decode_double(j.at("tol_abs"));
  spec.tol.rel = decode_double(j.at("tol_rel"));
  spec.nan_equal = j.at("nan_equal").get<bool>();
  spec.sens = j.contains("sens") ? decode_double(j.at("sens")) : 0.0;
  return spec;
}

Measurement finish_measurement(const PassPartial& p, int64_t numel, const PassSpec& spec) {
  Measurement m;
  ErrorFigures& f = m.figures;
  f.max_abs = p.max_abs;
  f.max_rel = p.max_rel;
  f.normwise_rel = norm_ratio(p.diff, p.judged);
  // Only where the pass reads the sensitivity, and never over an all-zero truth (a ratio to
  // the zero floor would open the budget without bound).
  const bool reads_sensitivity = spec.sens > 0 && p.sens.sum != 0 && p.judged.sum != 0;
  f.sensitivity_normwise = reads_sensitivity ? norm_ratio(p.sens, p.judged) : 0.0;
  f.normwise_conditioned = norm_ratio(p.diff_conditioned, p.judged_conditioned);
  f.worst_elem_ratio = p.worst_elem_ratio;
  f.budget_ratio = p.budget_ratio;
  f.numel = numel;
  f.elements_over = p.elements_over;
  f.nonfinite_mismatches = p.nonfinite_mismatches;
  f.scale = spec.scale;
  m.worst = p.worst;
  m.first_nonfinite_mismatch = p.first_nonfinite_mismatch;
  return m;
}

// ---- the host pass --------------------------------------------------------------------------

namespace {

// Elements decoded per block: large enough to amortise the dtype dispatch, small enough that the
// block buffers stay in L2.
constexpr int64_t kBlock = 4096;

// A reduction over four interleaved accumulators: one chain of dependent additions was the
// bottleneck of the whole comparison.
template <class Step, class Combine>
double lanes(std::span<const double> xs, Step step, Combine combine) {
  double acc[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= xs.size(); i += 4) {
    for (size_t k = 0; k < 4; ++k) acc[k] = step(acc[k], xs[i + k]);
  }
  for (; i < xs.size(); ++i) acc[0] = step(acc[0], xs[i]);
  return combine(combine(acc[0], acc[1]), combine(acc[2], acc[3]));
}

// The squares of a whole block at once: one power of two (from the block's largest magnitude)
// scales every value, then four lanes sum them. Gives the same SquareSum as add_square per
// element up to rounding, much faster.
void add_block_squares(SquareSum& s, std::span<const double> xs) {
  const double largest = lanes(
      xs, [](double acc, double x) { return std::max(acc, std::abs(x)); },
      [](double a, double b) { return std::max(a, b); });
  if (largest == 0) return;
  if (!std::isfinite(largest)) {
    s.sum = kInfinity;
    return;
  }
  const int exponent = square_exponent_of(largest);
  const double factor = std::ldexp(1.0, -exponent);
  const double sum = lanes(
      xs, [factor](double acc, double x) { return acc + (x * factor) * (x * factor); },
      [](double a, double b) { return a + b; });
  s = merge_squares(s, SquareSum{sum, exponent});
}

// Decodes [first, first + count) of x (and y, and s) block by block and runs
// visit(first, xs, ys, ss); a tensor not given comes as an empty span.
template <class Visit>
void for_each_block(const TensorView& x, const TensorView* y, const TensorView* s, int64_t first,
                    int64_t count, Visit visit) {
  std::vector<double> xs(kBlock), ys(y != nullptr ? kBlock : 0), ss(s != nullptr ? kBlock : 0);
  for (int64_t at = first; at < first + count; at += kBlock) {
    const size_t len = static_cast<size_t>(std::min(kBlock, first + count - at));
    x.decode(at, {xs.data(), len});
    if (y != nullptr) y->decode(at, {ys.data(), len});
    if (s != nullptr) s->decode(at, {ss.data(), len});
    visit(at, std::span<double>(xs.data(), len), std::span<double>(ys.data(), y ? len : 0),
          std::span<double>(ss.data(), s ? len : 0));
  }
}

// Non-finite values are rare, so blocks are screened for them with a branch-free loop first.
bool all_finite(std::span<const double> xs, std::span<const double> ys, double threshold) {
  bool finite = true;
  for (size_t i = 0; i < xs.size(); ++i) finite &= pair_is_finite(xs[i], ys[i], threshold);
  return finite;
}

}  // namespace

PassPartial measure_partial(const TensorView& x, const TensorView& y, const TensorView* sens,
                            const PassSpec& spec, int64_t first, int64_t count) {
  PassPartial p = empty_partial();
  const double ratio_scale = nonzero_or_floor(spec.scale);
  std::vector<double> diffs(kBlock), conditioned_diffs, conditioned_ys;
  if (sens != nullptr) {
    conditioned_diffs.resize(kBlock);
    conditioned_ys.resize(kBlock);
  }
  for_each_block(
      x, &y, sens, first, count,
      [&](int64_t at, std::span<double> xs, std::span<double> ys, std::span<double> ss) {
        if (!all_finite(xs, ys, spec.threshold)) {
          for (size_t i = 0; i < xs.size(); ++i) {
            // A pair left out of the norms leaves its sensitivity out too.
            if (!ss.empty() && !pair_is_finite(xs[i], ys[i], spec.threshold)) {
              ss[i] = 0;
            }
            screen_nonfinite(p, at + int64_t(i), xs[i], ys[i], spec);
          }
        }
        // A local copy the compiler can keep in registers: stores to `diffs` could alias
        // `p`.
        PassPartial local = p;
        if (ss.empty()) {
          for (size_t i = 0; i < xs.size(); ++i) {
            diffs[i] =
                accumulate_finite(local, at + int64_t(i), xs[i], ys[i], spec, ratio_scale, 0);
          }
          // No sensitivity: every element's budget is the floor.
          add_block_squares(local.diff_conditioned, {diffs.data(), xs.size()});
          add_block_squares(local.judged_conditioned, ys);
        } else {
          for (size_t i = 0; i < xs.size(); ++i) {
            diffs[i] =
                accumulate_finite(local, at + int64_t(i), xs[i], ys[i], spec, ratio_scale, ss[i]);
            const bool c = conditioned(ys[i], ss[i], spec);
            conditioned_diffs[i] = c ? diffs[i] : 0.0;
            conditioned_ys[i] = c ? ys[i] : 0.0;
          }
          add_block_squares(local.diff_conditioned, {conditioned_diffs.data(), xs.size()});
          add_block_squares(local.judged_conditioned, {conditioned_ys.data(), xs.size()});
        }
        add_block_squares(local.diff, {diffs.data(), xs.size()});
        add_block_squares(local.judged, ys);
        add_block_squares(local.sens, ss);
        p = local;
      });
  return p;
}

Measurement measure(const TensorView& x, const TensorView& y, const PassSpec& spec,
                    const TensorView* sens) {
  const int64_t n = y.numel();
  if (x.numel() != n || (sens != nullptr && sens->numel() != n)) {
    throw std::invalid_argument("a pass over '" + x.name + "' (" + std::to_string(x.numel()) +
                                " elements) judged by '" + y.name + "' (" + std::to_string(n) +
                                " elements)" +
                                (sens != nullptr ? " with sensitivity '" + sens->name + "' (" +
                                                       std::to_string(sens->numel()) + " elements)"
                                                 : std::string()));
  }
  Measurement m = finish_measurement(measure_partial(x, y, sens, spec, 0, n), n, spec);
  if (m.worst >= 0) {
    m.x_at_worst = x.value_at(m.worst);
    m.y_at_worst = y.value_at(m.worst);
    if (sens != nullptr) m.s_at_worst = sens->value_at(m.worst);
  }
  if (m.first_nonfinite_mismatch >= 0) {
    m.x_at_first_nonfinite = x.value_at(m.first_nonfinite_mismatch);
    m.y_at_first_nonfinite = y.value_at(m.first_nonfinite_mismatch);
  }
  return m;
}

double finite_rms(const TensorView& t, double threshold) {
  RmsPartial p = empty_rms();
  for_each_block(t, nullptr, nullptr, 0, t.numel(),
                 [&](int64_t, std::span<double> ts, std::span<double>, std::span<double>) {
                   for (double& v : ts) {
                     if (classify(v, threshold) == Kind::Finite) {
                       ++p.finite;
                     } else {
                       v = 0;
                     }
                   }
                   add_block_squares(p.squares, ts);
                 });
  return rms_of(p);
}

}  // namespace kbv::check
