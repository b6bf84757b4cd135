#include "judge/kernel_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>

namespace kbv::judge {
using nlohmann::json;

namespace {

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `word` occurs in `text` with no identifier character on either side.
bool contains_identifier(const std::string& text, const std::string& word) {
  if (word.empty()) return false;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    bool left = at == 0 || !is_ident_char(text[at - 1]);
    size_t end = at + word.size();
    bool right = end >= text.size() || !is_ident_char(text[end]);
    if (left && right) return true;
  }
  return false;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string short_name(const std::string& name) {
  return name.size() > 80 ? name.substr(0, 77) + "..." : name;
}

}  // namespace

namespace {

bool matches_any(const std::string& name, const std::vector<std::string>& words) {
  for (const auto& word : words) {
    if (contains_identifier(name, word)) return true;
  }
  return false;
}

// Vendor libraries a launcher label names (allocation_source.cpp's labels).
bool is_library_launcher(const std::string& launcher) {
  static const std::set<std::string> libraries = {"cublas",   "cudnn",  "cufft", "cusparse",
                                                  "cusolver", "curand", "nccl",  "nvshmem"};
  return libraries.contains(launcher);
}

// A launcher that says who launched: not a graph replay, not unknown, not the runtime or the
// driver themselves (the stack walk skips them; seen only when it found nothing else).
bool is_known_launcher(const std::string& launcher) {
  static const std::set<std::string> unknown = {"",       "unknown", "graph",     "cudart",
                                                "driver", "cupti",   "kbv_native"};
  return !unknown.contains(launcher);
}

std::string origin_by_name(const std::string& name, const OwnKernels& own) {
  if (matches_any(name, own.cuda)) return "own";
  if (matches_any(name, own.triton)) return "candidate";
  const std::string n = lower(name);
  static const char* const library[] = {"cublas",  "cutlass",  "cudnn",    "xmma",
                                        "nvjet",   "gemm",     "gemv",     "sm90_",
                                        "sm80_",   "sm100_",   "ampere_",  "hopper",
                                        "volta_",  "turing_",  "winograd", "implicit_convolve",
                                        "conv2d_", "convolve", "fft"};
  for (const char* pattern : library) {
    if (n.find(pattern) != std::string::npos) return "library";
  }
  if (n.find("at::") != std::string::npos || n.find("at_cuda_detail::") != std::string::npos ||
      n.find("c10::") != std::string::npos || n.find("pytorch") != std::string::npos) {
    return "aten";
  }
  return "other";
}

}  // namespace

std::string kernel_origin(const std::string& name, const std::string& kind, const OwnKernels& own,
                          const std::string& launcher) {
  if (kind == "copy" || kind == "fill") return kind;
  if (!is_known_launcher(launcher)) return origin_by_name(name, own);
  // PyTorch launched it: its own kernel, or a Triton kernel PyTorch's static launcher runs for
  // the candidate (a @triton.jit function of the candidate's file, by name). A __global__ kernel
  // compiled into the candidate's extension is never launched by libtorch.
  if (launcher == "torch") return matches_any(name, own.triton) ? "candidate" : "aten";
  if (is_library_launcher(launcher)) return "library";
  // The candidate's extension, Triton's launcher (kernels JIT-compiled from its source), ctypes,
  // another shared object: the candidate's own code launched it.
  return matches_any(name, own.cuda) ? "own" : "candidate";
}

std::string kernel_origin(const std::string& name, const std::string& kind,
                          const std::vector<std::string>& own_kernels) {
  return kernel_origin(name, kind, OwnKernels{own_kernels, {}}, "");
}

KernelTraceAssessment assess_kernel_trace(const json& gpu, const std::vector<std::string>& own,
                                          bool reference_heavy, int extension_calls) {
  return assess_kernel_trace(gpu, OwnKernels{own, {}}, reference_heavy, extension_calls);
}

KernelTraceAssessment assess_kernel_trace(const json& gpu, const OwnKernels& own,
                                          bool reference_heavy, int extension_calls) {
  KernelTraceAssessment a;
  a.available = gpu.value("available", false);
  if (!a.available) {
    a.record = {{"available", false}, {"why", gpu.value("why", "")}};
    return a;
  }
  const auto current = gpu.value("current_stream", -1);
  const double call_end = gpu.value("call_end_us", 0.0);
  double first_start = std::numeric_limits<double>::infinity();
  double last_end = -std::numeric_limits<double>::infinity();
  double escaped_end = call_end;
  std::map<std::string, int> by_origin;
  std::set<std::string> own_seen, candidate_seen, library_seen, aten_seen, escaped_names;
  std::set<long long> other_streams;
  int side_activities = 0;
  int with_launcher = 0;
  double kernel_us = 0.0, candidate_us = 0.0;
  // Who each kernel belongs to. `kernels_seen` (every kernel of the forward, grouped by name
  // and launcher) when the worker sent it; else the activities, which are capped.
  auto attribute = [&](const std::string& name, const std::string& kind,
                       const std::string& launcher, int count, double us) {
    const std::string origin = kernel_origin(name, kind, own, launcher);
    by_origin[origin] += count;
    if (origin == "own") own_seen.insert(short_name(name));
    if (origin == "candidate") candidate_seen.insert(short_name(name));
    if (origin == "library") library_seen.insert(short_name(name));
    if (origin == "aten") aten_seen.insert(short_name(name));
    if (kind == "copy" || kind == "fill") return;
    a.kernels += count;
    if (is_known_launcher(launcher)) with_launcher += count;
    kernel_us += us;
    if (origin == "own" || origin == "candidate") {
      a.candidate_kernels += count;
      candidate_us += us;
    }
  };
  const json activities = gpu.value("activities", json::array());
  const bool grouped = gpu.contains("kernels_seen");
  bool complete = true;
  if (grouped) {
    complete = !gpu.value("kernels_seen_truncated", false);
    for (const auto& k : gpu["kernels_seen"]) {
      attribute(k.value("name", ""), "kernel", k.value("launcher", ""), k.value("count", 1),
                k.value("us", 0.0));
    }
  } else {
    complete = gpu.value("activity_count", 0) <= static_cast<int>(activities.size());
  }
  for (const auto& act : activities) {
    const std::string name = act.value("name", "");
    const std::string kind = act.value("kind", "kernel");
    const double start = act.value("start_us", 0.0);
    const double end = act.value("end_us", 0.0);
    if (!grouped || kind == "copy" || kind == "fill") {
      attribute(name, kind, act.value("launcher", ""), 1, std::max(0.0, end - start));
    }
    first_start = std::min(first_start, start);
    last_end = std::max(last_end, end);
    const long long stream = act.value("stream", -1LL);
    if (stream != current) {
      ++side_activities;
      other_streams.insert(stream);
      if (end > escaped_end) escaped_end = end;
      if (end > call_end + kEscapeSlackUs) escaped_names.insert(short_name(name));
    }
  }
  // Whether the trace can say that none of the kernels is the candidate's: it saw every kernel
  // (or already found one of the candidate's) and there was at least one.
  a.decides_custom_code = a.kernels > 0 && (complete || a.candidate_kernels > 0);
  const double span = last_end > first_start ? last_end - first_start : 0.0;
  const double escaped = escaped_end - call_end;
  a.own_kernels_ran = !own_seen.empty();
  a.record = {
      {"available", true},
      {"current_stream", current},
      {"call_end_us", call_end},
      {"span_us", span},
      {"escaped_us", escaped},
      {"activities", gpu.value("activity_count", 0)},
      {"by_origin", by_origin},
      {"own_kernels_defined", own.cuda},
      {"own_kernels_launched", std::vector<std::string>(own_seen.begin(), own_seen.end())},
      {"library_kernels", std::vector<std::string>(library_seen.begin(), library_seen.end())},
      {"other_streams", std::vector<long long>(other_streams.begin(), other_streams.end())},
      {"kernels", a.kernels},
      {"candidate_kernels", a.candidate_kernels},
      // the share of the kernels' summed device time spent in the candidate's own kernels
      {"candidate_time_share", kernel_us > 0 ? candidate_us / kernel_us : 0.0},
      // how kernels were attributed: by their launcher (kbv_native's launch callbacks) or by
      // name alone (torch.profiler, or launch callbacks unavailable)
      {"attributed_by", with_launcher > 0 ? "launcher" : "name"},
      {"all_kernels_seen", complete}};
  if (!own.triton.empty()) a.record["triton_kernels_defined"] = own.triton;
  if (!candidate_seen.empty()) {
    a.record["candidate_kernels_launched"] =
        std::vector<std::string>(candidate_seen.begin(), candidate_seen.end());
  }

  if (escaped > std::max(kEscapeSlackUs, kEscapeFraction * span)) {
    a.flags.push_back(
        {"timing_escapes_events", Severity::Reject,
         fmt::format("GPU work on stream(s) {} other than the current stream ({}) ended {:.1f} us "
                     "after the forward's work on the current stream did ({:.0f}% of the "
                     "forward's {:.1f} us GPU span): CUDA events on the current stream miss it; "
                     "kernels: {}",
                     json(other_streams).dump(), current, escaped,
                     span > 0 ? 100.0 * escaped / span : 100.0, span, json(escaped_names).dump())});
  } else if (side_activities > 0) {
    a.flags.push_back({"side_stream_work", Severity::Info,
                       fmt::format("{} GPU activit{} on stream(s) {} other than the current one, "
                                   "all finished before the current stream's work did (joined)",
                                   side_activities, side_activities == 1 ? "y" : "ies",
                                   json(other_streams).dump())});
  }
  if (!own.cuda.empty() && extension_calls > 0 && own_seen.empty()) {
    a.flags.push_back(
        {"kernel_never_called", Severity::Reject,
         fmt::format("the source defines __global__ kernel(s) {} and the forward called the "
                     "extension {} time(s), but none of them was launched on the GPU; what ran: "
                     "{}",
                     json(own.cuda).dump(), extension_calls, json(by_origin).dump())});
  }
  if (reference_heavy && a.candidate_kernels == 0 && !library_seen.empty()) {
    a.flags.push_back(
        {"library_main_op", Severity::Reject,
         fmt::format("the forward's GPU work is library kernels ({}) and none of the "
                     "candidate's own kernels{}",
                     json(library_seen).dump(),
                     own.cuda.empty() ? " (its source defines no __global__ kernel)" : "")});
  }
  auto count = [&by_origin](const char* origin) {
    const auto it = by_origin.find(origin);
    return it == by_origin.end() ? 0 : it->second;
  };
  if (a.decides_custom_code && a.candidate_kernels == 0 && count("other") == 0) {
    std::set<std::string> shown = library_seen;
    for (const auto& name : aten_seen) {
      if (shown.size() >= 6) break;
      shown.insert(name);
    }
    a.flags.push_back(
        {"no_custom_kernel", Severity::Reject,
         fmt::format("none of the forward's {} GPU kernel(s) is the candidate's own: {} "
                     "PyTorch kernel(s) and {} library kernel(s) (attributed by {}): {}",
                     a.kernels, count("aten"), count("library"),
                     with_launcher > 0 ? "the library that launched each" : "name",
                     json(shown).dump())});
  }
  return a;
}

}  // namespace kbv::judge
