#include "core/result.hpp"

#include <algorithm>

#include "core/flags.hpp"

namespace kbv {

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::Correct:
      return "correct";
    case Verdict::Incorrect:
      return "incorrect";
    case Verdict::Rejected:
      return "rejected";
    case Verdict::CompileError:
      return "compile_error";
    case Verdict::RuntimeError:
      return "runtime_error";
    case Verdict::Timeout:
      return "timeout";
    case Verdict::HarnessError:
      return "harness_error";
  }
  return "unknown";
}

std::string_view to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::DiskFull:
      return "disk_full";
    case FaultKind::ReferenceCrashed:
      return "reference_crashed";
    case FaultKind::OutOfMemory:
      return "out_of_memory";
    case FaultKind::Channel:
      return "channel";
    case FaultKind::Internal:
      return "internal";
  }
  return "internal";
}

nlohmann::json HarnessFault::to_json() const {
  nlohmann::json out = {{"kind", to_string(kind)}, {"stage", stage}, {"detail", detail}};
  if (!memory.empty()) out["memory"] = memory;
  return out;
}

std::string HarnessFault::reason() const {
  std::string first = detail.substr(0, detail.find('\n'));
  std::string out = "a fault of kbv itself (" + std::string(to_string(kind)) + ")";
  if (!stage.empty()) out += " while " + stage;
  if (!first.empty()) out += ": " + first;
  return out + "; not a verdict on the candidate, and a rerun evaluates it again";
}

std::string_view to_string(Severity severity) {
  switch (severity) {
    case Severity::Reject:
      return "reject";
    case Severity::Warn:
      return "warn";
    case Severity::Info:
      return "info";
  }
  return "unknown";
}

void add_flag(std::vector<Flag>& flags, std::string id, Severity severity, std::string detail) {
  require_catalogued(id, severity);
  // One flag per id: a repeated finding (say, on every draw) keeps its first evidence.
  if (has_flag(flags, id)) return;
  flags.push_back(Flag{std::move(id), severity, std::move(detail)});
}

bool has_flag(const std::vector<Flag>& flags, std::string_view id) {
  return std::any_of(flags.begin(), flags.end(), [&](const Flag& f) { return f.id == id; });
}

bool has_reject_flag(const std::vector<Flag>& flags) {
  return std::any_of(flags.begin(), flags.end(),
                     [](const Flag& f) { return f.severity == Severity::Reject; });
}

void Result::add_flag(std::string id, Severity severity, std::string detail) {
  kbv::add_flag(flags, std::move(id), severity, std::move(detail));
}

bool Result::has_flag(std::string_view id) const { return kbv::has_flag(flags, id); }

bool Result::has_reject_flag() const { return kbv::has_reject_flag(flags); }

nlohmann::json Result::to_json() const {
  nlohmann::json flag_list = nlohmann::json::array();
  for (const auto& f : flags) {
    flag_list.push_back({{"id", f.id}, {"severity", to_string(f.severity)}, {"detail", f.detail}});
  }
  nlohmann::json families = nlohmann::json::object();
  for (const auto& fam : correctness) {
    families[fam.family] = {{"draws", fam.draws},
                            {"passed", fam.passed},
                            {"evaluated", fam.evaluated},
                            {"ok", fam.ok()},
                            {"max_abs", fam.max_abs},
                            {"max_rel", fam.max_rel},
                            {"normwise_rel", fam.normwise_rel},
                            {"cases", fam.cases}};
    if (fam.elem_margin && fam.norm_margin) {
      families[fam.family]["margins"] = {{"elementwise", *fam.elem_margin},
                                         {"normwise", *fam.norm_margin}};
    }
  }
  nlohmann::json out = {
      {"schema", kResultSchema},    {"kbv_version", kVersion}, {"verdict", to_string(verdict)},
      {"reason", reason},           {"flags", flag_list},      {"correctness", families},
      {"timing", timing},           {"speedup", speedup},      {"memory", memory},
      {"problem", problem},         {"candidate", candidate},  {"protocol", protocol},
      {"environment", environment}, {"isolation", isolation},  {"durations_s", durations_s},
      {"limits", limits},
  };
  if (!error_detail.empty()) out["error_detail"] = error_detail;
  if (harness_fault) out["harness_fault"] = harness_fault->to_json();
  return out;
}

}  // namespace kbv
