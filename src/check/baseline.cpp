#include "check/baseline.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace kbv::check {

using nlohmann::json;
using tensor::DType;
using tensor::TensorView;

namespace {

DType dtype_from_json(const json& j) {
  const auto name = j.get<std::string>();
  const auto dtype = tensor::parse_torch_dtype(name);
  if (!dtype) throw std::invalid_argument("unknown dtype '" + name + "'");
  return *dtype;
}

}  // namespace

int64_t OutputBaseline::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

json OutputBaseline::to_json() const {
  return {{"dtype", tensor::torch_name(dtype)},
          {"shape", shape},
          {"truth_dtype", tensor::torch_name(truth_dtype)},
          {"truth_is_reference", truth_is_reference},
          {"truth_scale", encode_double(truth_scale)},
          {"reference_scale", encode_double(reference_scale)},
          {"vs_truth", vs_truth ? vs_truth->to_json() : json(nullptr)},
          {"vs_budget", vs_budget ? vs_budget->to_json() : json(nullptr)}};
}

OutputBaseline OutputBaseline::from_json(const json& j) {
  OutputBaseline b;
  b.dtype = dtype_from_json(j.at("dtype"));
  b.shape = j.at("shape").get<std::vector<int64_t>>();
  b.truth_dtype = dtype_from_json(j.at("truth_dtype"));
  b.truth_is_reference = j.at("truth_is_reference").get<bool>();
  b.truth_scale = decode_double(j.at("truth_scale"));
  b.reference_scale = decode_double(j.at("reference_scale"));
  if (const auto& v = j.at("vs_truth"); !v.is_null()) b.vs_truth = Measurement::from_json(v);
  // Optional: a worker of protocol version 2 or older measured none.
  if (const auto v = j.find("vs_budget"); v != j.end() && !v->is_null()) {
    b.vs_budget = Measurement::from_json(*v);
  }
  return b;
}

PassSpec baseline_spec(DType out, double truth_scale) {
  const double threshold = overflow_threshold(out);
  if (!tensor::is_floating(out)) return PassSpec{threshold, truth_scale, {0, 0}, true};
  return PassSpec{threshold, truth_scale, {kInfinity, 0}, true};
}

OutputBaseline describe_baseline(const TensorView& reference, const TensorView& truth) {
  if (truth.shape != reference.shape) {
    throw std::invalid_argument(fmt::format("truth '{}' has shape [{}] but the reference has [{}]",
                                            truth.name, fmt::join(truth.shape, ", "),
                                            fmt::join(reference.shape, ", ")));
  }
  const bool same = reference.data == truth.data && reference.dtype == truth.dtype;
  return describe_baseline_with(
      reference.dtype, reference.shape, truth.dtype, same,
      [&](double threshold) { return finite_rms(truth, threshold); },
      [&](double threshold) { return finite_rms(reference, threshold); },
      [&](const PassSpec& spec) { return measure(reference, truth, spec); });
}

}  // namespace kbv::check
