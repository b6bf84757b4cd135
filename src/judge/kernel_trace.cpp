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

std::string kernel_origin(const std::string& name, const std::string& kind,
                          const std::vector<std::string>& own_kernels) {
  if (kind == "copy" || kind == "fill") return kind;
  for (const auto& own : own_kernels) {
    if (contains_identifier(name, own)) return "own";
  }
  const std::string n = lower(name);
  static const char* const library[] = {"cublas",  "cutlass",  "cudnn",    "xmma",
                                        "nvjet",   "gemm",     "gemv",     "sm90_",
                                        "sm80_",   "sm100_",   "ampere_",  "hopper",
                                        "volta_",  "turing_",  "winograd", "implicit_convolve",
                                        "conv2d_", "convolve", "fft"};
  for (const char* pattern : library) {
    if (n.find(pattern) != std::string::npos) return "library";
  }
  if (n.find("at::") != std::string::npos || n.find("pytorch") != std::string::npos) {
    return "aten";
  }
  return "other";
}

KernelTraceAssessment assess_kernel_trace(const json& gpu, const std::vector<std::string>& own,
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
  std::set<std::string> own_seen, library_seen, escaped_names;
  std::set<long long> other_streams;
  int side_activities = 0;
  for (const auto& act : gpu.value("activities", json::array())) {
    const std::string name = act.value("name", "");
    const std::string origin = kernel_origin(name, act.value("kind", "kernel"), own);
    by_origin[origin] += 1;
    if (origin == "own") own_seen.insert(short_name(name));
    if (origin == "library") library_seen.insert(short_name(name));
    const double start = act.value("start_us", 0.0);
    const double end = act.value("end_us", 0.0);
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
      {"own_kernels_defined", own},
      {"own_kernels_launched", std::vector<std::string>(own_seen.begin(), own_seen.end())},
      {"library_kernels", std::vector<std::string>(library_seen.begin(), library_seen.end())},
      {"other_streams", std::vector<long long>(other_streams.begin(), other_streams.end())}};

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
  if (!own.empty() && extension_calls > 0 && own_seen.empty()) {
    a.flags.push_back(
        {"kernel_never_called", Severity::Reject,
         fmt::format("the source defines __global__ kernel(s) {} and the forward called the "
                     "extension {} time(s), but none of them was launched on the GPU; what ran: "
                     "{}",
                     json(own).dump(), extension_calls, json(by_origin).dump())});
  }
  if (reference_heavy && own_seen.empty() && !library_seen.empty()) {
    a.flags.push_back(
        {"library_main_op", Severity::Reject,
         fmt::format("the forward's GPU work is library kernels ({}) and none of the "
                     "candidate's own kernels{}",
                     json(library_seen).dump(),
                     own.empty() ? " (its source defines no __global__ kernel)" : "")});
  }
  return a;
}

}  // namespace kbv::judge
