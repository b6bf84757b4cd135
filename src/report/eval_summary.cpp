#include "report/eval_summary.hpp"

#include <fmt/format.h>

#include "core/figure_format.hpp"

namespace kbv::report {
namespace {

using nlohmann::json;

std::string speedup_line(const json& s, const char* label) {
  if (!s.is_object() || !s.contains("value")) return fmt::format("  {:<14} not measured\n", label);
  return fmt::format("  {:<14} {}  [{}, {}]{}\n", label, times(s["value"].get<double>()),
                     significant(s["ci_low"].get<double>()),
                     significant(s["ci_high"].get<double>()), s.value("tie", false) ? "  tie" : "");
}

std::string time_line(const json& t, const char* label) {
  if (!t.is_object()) return "";
  // Four significant digits: a 2-microsecond kernel is 0.002000 ms, not 0.0020.
  return fmt::format("  {:<14} {} ms  [{}, {}]  n={}\n", label,
                     significant(t.value("median_ms", 0.0), 4),
                     significant(t.value("ci_low_ms", 0.0), 4),
                     significant(t.value("ci_high_ms", 0.0), 4), t.value("n", 0));
}

std::string mib(const json& bytes) {
  return bytes.is_number() ? fmt::format("{:.2f} MiB", bytes.get<double>() / (1024.0 * 1024.0))
                           : "n/a";
}

}  // namespace

std::string summary(const Result& r) {
  std::string out = fmt::format("{}: {}\n", to_string(r.verdict), r.reason);
  if (r.harness_fault) {
    out += fmt::format("  harness fault  {} while {}\n", to_string(r.harness_fault->kind),
                       r.harness_fault->stage);
  }
  // A harness fault may come before the problem was loaded: no name to show then.
  if (!r.harness_fault || r.problem.contains("name")) {
    out += fmt::format("  problem        {}{}\n", r.problem.value("name", std::string("?")),
                       r.problem.value("degenerate", false) ? "  (DEGENERATE: see flags)" : "");
  }
  out += fmt::format(
      "  protocol       {} v{}{}  on {}\n", r.protocol.value("name", std::string("?")),
      r.protocol.value("version", 0),
      r.protocol.value("allow_library", false) ? " (--allow-library: PyTorch rewrites accepted)"
                                               : "",
      r.environment.value("device_name", r.environment.value("device", std::string("?"))));
  if (!r.correctness.empty()) {
    out += "  correctness   ";
    for (const auto& f : r.correctness) {
      out += fmt::format(" {} {}/{}", f.family, f.passed, f.evaluated ? f.draws : 0);
    }
    out += "\n";
    // The closest the candidate came to its budgets (error / budget, 1 = on the budget).
    const FamilyResult* elem = nullptr;
    const FamilyResult* norm = nullptr;
    for (const auto& f : r.correctness) {
      if (f.elem_margin && (!elem || *f.elem_margin > *elem->elem_margin)) elem = &f;
      if (f.norm_margin && (!norm || *f.norm_margin > *norm->norm_margin)) norm = &f;
    }
    if (elem && norm) {
      out += fmt::format("  margins        elementwise {} of budget ({}), normwise {} ({})\n",
                         significant(*elem->elem_margin), elem->family,
                         significant(*norm->norm_margin), norm->family);
    }
  }
  if (r.timing.is_object()) {
    out += time_line(r.timing["candidate"], "candidate");
    out += time_line(r.timing["baseline_tf32"], "TF32 baseline");
    out += time_line(r.timing["baseline_fp32"], "FP32 baseline");
    out += speedup_line(r.speedup["vs_tf32"], "vs TF32");
    out += speedup_line(r.speedup["vs_fp32"], "vs FP32");
  }
  if (r.memory.is_object() && r.memory.contains("candidate_peak_bytes")) {
    const auto& ratio = r.memory["peak_ratio"];
    out += fmt::format("  peak memory    {} vs {} (ratio {})\n",
                       mib(r.memory["candidate_peak_bytes"]), mib(r.memory["reference_peak_bytes"]),
                       ratio.is_number() ? significant(ratio.get<double>()) : "n/a");
  }
  for (const auto& f : r.flags) {
    out += fmt::format("  [{}] {}: {}\n", to_string(f.severity), f.id, f.detail);
  }
  return out;
}

}  // namespace kbv::report
