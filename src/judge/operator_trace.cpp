#include "judge/operator_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

namespace kbv::judge {
using nlohmann::json;

std::string heavy_class(const std::string& op) {
  static const std::set<std::string> matmul = {
      "aten::mm",     "aten::addmm",  "aten::bmm",    "aten::baddbmm",          "aten::addbmm",
      "aten::matmul", "aten::linear", "aten::einsum", "aten::_addmm_activation"};
  static const std::set<std::string> conv = {"aten::convolution",
                                             "aten::_convolution",
                                             "aten::conv1d",
                                             "aten::conv2d",
                                             "aten::conv3d",
                                             "aten::mkldnn_convolution",
                                             "aten::cudnn_convolution",
                                             "aten::conv_transpose2d",
                                             "aten::_slow_conv2d_forward",
                                             "aten::thnn_conv2d",
                                             "aten::slow_conv3d",
                                             "aten::_nnpack_spatial_convolution",
                                             "aten::convolution_overrideable"};
  if (matmul.contains(op)) return "matmul";
  if (conv.contains(op)) return "conv";
  if (op == "aten::_softmax" || op == "aten::softmax") return "softmax";
  if (op == "aten::_log_softmax" || op == "aten::log_softmax") return "log_softmax";
  if (op == "aten::native_layer_norm" || op == "aten::layer_norm") return "layer_norm";
  return "";
}

namespace {

// Operators that compute nothing: views, allocations, copies, metadata.
bool is_bookkeeping(const std::string& op) {
  static const std::set<std::string> ops = {"aten::t",
                                            "aten::view",
                                            "aten::reshape",
                                            "aten::_reshape_alias",
                                            "aten::expand",
                                            "aten::detach",
                                            "aten::alias",
                                            "aten::empty",
                                            "aten::empty_like",
                                            "aten::as_strided",
                                            "aten::transpose",
                                            "aten::permute",
                                            "aten::contiguous",
                                            "aten::clone",
                                            "aten::_to_copy",
                                            "aten::copy_",
                                            "aten::unsqueeze",
                                            "aten::squeeze",
                                            "aten::select",
                                            "aten::slice",
                                            "aten::empty_strided",
                                            "aten::zeros",
                                            "aten::lift_fresh",
                                            "aten::_unsafe_view",
                                            "aten::resize_",
                                            "aten::fill_",
                                            "aten::zero_",
                                            "aten::flatten",
                                            "aten::new_empty",
                                            "aten::new_empty_strided",
                                            "aten::unbind"};
  return ops.contains(op);
}

std::set<std::string> heavy_classes(const json& ops) {
  std::set<std::string> out;
  for (const auto& [op, count] : ops.items()) {
    auto cls = heavy_class(op);
    if (!cls.empty()) out.insert(cls);
  }
  return out;
}

std::string joined(const std::set<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

TraceAssessment assess_trace(const json& reference, const json& candidate) {
  TraceAssessment a;
  json ref_ops = reference.value("ops", json::object());
  json cand_ops = candidate.value("ops", json::object());
  json calls = candidate.value("extension_calls", json::object());
  json functions = candidate.value("extension_functions", json::array());
  const int jit_launches = candidate.value("jit_launches", 0);
  a.record = {{"reference_ops", ref_ops},
              {"candidate_ops", cand_ops},
              {"extension_calls", calls},
              {"extension_functions", functions}};
  if (candidate.contains("jit_launches")) a.record["jit_launches"] = jit_launches;
  if (candidate.contains("error")) {
    a.record["error"] = candidate["error"];
    return a;
  }
  // Custom operators registered through TORCH_LIBRARY show up under their own namespace.
  int custom_ops = 0;
  for (const auto& [op, count] : cand_ops.items()) {
    if (!op.starts_with("aten::") && !op.starts_with("prim::")) custom_ops += count.get<int>();
  }
  int extension_calls = custom_ops;
  for (const auto& [name, count] : calls.items()) extension_calls += count.get<int>();
  // The candidate's own code that ran: its extension functions and custom operators, and the
  // Triton kernels it launched (they do not pass through the dispatcher).
  const int own_calls = extension_calls + jit_launches;
  a.own_calls = own_calls;
  a.record["own_calls"] = own_calls;

  auto ref_heavy = heavy_classes(ref_ops);
  auto cand_heavy = heavy_classes(cand_ops);
  bool reference_only_heavy = !ref_heavy.empty();
  for (const auto& [op, count] : ref_ops.items()) {
    if (heavy_class(op).empty() && !is_bookkeeping(op)) reference_only_heavy = false;
  }
  bool all_heavy_in_aten = !ref_heavy.empty();
  for (const auto& cls : ref_heavy)
    all_heavy_in_aten = all_heavy_in_aten && cand_heavy.contains(cls);
  a.record["reference_heavy"] = std::vector<std::string>(ref_heavy.begin(), ref_heavy.end());
  a.record["candidate_heavy_in_aten"] =
      std::vector<std::string>(cand_heavy.begin(), cand_heavy.end());

  if (all_heavy_in_aten && (own_calls == 0 || reference_only_heavy)) {
    a.flags.push_back(
        {"library_main_op", Severity::Reject,
         fmt::format("the main computation ({}) is done by PyTorch's own operators inside the "
                     "forward{}",
                     joined(ref_heavy),
                     own_calls == 0 ? " and no custom kernel was called"
                                    : ", and the reference is nothing but that operation")});
  }
  if (own_calls == 0) {
    // The operators PyTorch ran, most called first, as evidence.
    std::vector<std::pair<int, std::string>> ran;
    int total = 0;
    for (const auto& [op, count] : cand_ops.items()) {
      total += count.get<int>();
      ran.emplace_back(-count.get<int>(), op);
    }
    std::sort(ran.begin(), ran.end());
    std::string shown;
    for (size_t i = 0; i < ran.size() && i < 6; ++i) {
      shown += fmt::format("{}{} x{}", i == 0 ? "" : ", ", ran[i].second, -ran[i].first);
    }
    a.flags.push_back(
        {"no_custom_kernel", Severity::Reject,
         fmt::format("the forward ran none of the candidate's own code (no extension function, "
                     "no operator of its own namespace, no Triton kernel): {} PyTorch operator "
                     "call(s){}{}",
                     total, shown.empty() ? "" : ": ", shown)});
  }
  if (!functions.empty() && extension_calls == 0) {
    a.flags.push_back({"kernel_never_called", Severity::Reject,
                       fmt::format("the candidate builds {} extension function(s) ({}) and the "
                                   "forward calls none of them",
                                   functions.size(), functions.dump())});
  }
  return a;
}

bool is_library_flag(const std::string& id) {
  return id == "library_main_op" || id == "kernel_never_called" || id == "no_custom_kernel";
}

Severity trace_flag_severity(const Flag& flag, const LibraryPolicy& policy) {
  if (!is_library_flag(flag.id)) return flag.severity;
  return policy.rejects() ? flag.severity : Severity::Warn;
}

}  // namespace kbv::judge
