#include "report/audit_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/figure_format.hpp"
#include "stats/summary.hpp"

namespace kbv::report {
using nlohmann::json;

namespace {

std::optional<double> number_at(const json& j, const json::json_pointer& p) {
  if (!j.contains(p)) return std::nullopt;
  const json& v = j.at(p);
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

std::string cell(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : "";
}

// A ratio with significant digits (kbv::significant), "" when unset.
std::string ratio(const std::optional<double>& v, int digits = 3) {
  return v ? significant(*v, digits) : "";
}

std::string gib(const std::optional<double>& bytes) {
  return bytes ? fmt::format("{:.2f}", *bytes / (1024.0 * 1024.0 * 1024.0)) : "";
}

// The median of a kernel audit's per-call kernel counts (`timing.<side>.kernel_audit.kernels`),
// none where the audit was unavailable or recorded no call.
std::optional<double> kernels_per_call(const json& result, const char* side) {
  const json::json_pointer at(std::string("/timing/") + side + "/kernel_audit");
  if (!result.contains(at) || !result.at(at).value("available", false)) return std::nullopt;
  std::vector<double> counts;
  for (const auto& n : result.at(at).value("kernels", json::array())) {
    if (n.is_number()) counts.push_back(n.get<double>());
  }
  if (counts.empty()) return std::nullopt;
  return stats::summarize(counts).median;
}

// The first audited call's kernel signature (kernel_audit.signature): its hash and the name of
// its most frequent kernel, empty where none was recorded.
std::pair<std::string, std::string> kernel_signature(const json& result, const char* side) {
  const json::json_pointer at(std::string("/timing/") + side + "/kernel_audit/signature");
  if (!result.contains(at) || !result.at(at).is_object()) return {};
  const json& signature = result.at(at);
  const json top = signature.value("top", json::array());
  return {signature.value("sha256", ""),
          !top.empty() && top[0].is_string() ? top[0].get<std::string>() : std::string()};
}

std::string escape_md(std::string text) {
  for (char& c : text) {
    if (c == '|' || c == '\n') c = ' ';
  }
  return text;
}

std::string escape_csv(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

json to_json(const AuditRow& r) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"problem", r.problem},
          {"level", r.level ? json(*r.level) : json(nullptr)},
          {"verdict", r.verdict},
          {"reason", r.reason},
          {"fits", r.fits},
          {"alone", r.alone},
          {"seconds", r.seconds},
          {"degenerate", r.degenerate},
          {"degenerate_why", r.degenerate_why},
          {"reference_fails_float64", r.reference_fails_float64},
          {"worst_reference_normwise", opt(r.worst_reference_normwise)},
          {"reference_over_budget_cases", r.reference_over_budget},
          {"worst_reference_budget_ratio", opt(r.worst_reference_budget_ratio)},
          {"floor_judged_cases", r.floor_judged},
          {"truth_float32_cases", r.truth_float32},
          {"truth_chunks", r.truth_chunks},
          {"truth_rows_note", r.truth_rows_note},
          {"tf32_ms", opt(r.tf32_ms)},
          {"fp32_ms", opt(r.fp32_ms)},
          {"fp32_over_tf32", opt(r.fp32_over_tf32)},
          {"self_speedup", opt(r.self_speedup)},
          {"self_ci_low", opt(r.self_low)},
          {"self_ci_high", opt(r.self_high)},
          {"peak_bytes", opt(r.peak_bytes)},
          {"copy_kernels_per_call", opt(r.copy_kernels)},
          {"tf32_kernels_per_call", opt(r.tf32_kernels)},
          {"copy_kernel_signature", r.copy_signature},
          {"tf32_kernel_signature", r.tf32_signature},
          {"plans_differ", r.plans_differ()},
          {"copy_plans_under_pressure", r.copy_plans_squeezed},
          {"flags", r.flags}};
}

}  // namespace

AuditRow audit_row(const json& result) {
  AuditRow r;
  const json row = result.value("_row", json::object());
  const json problem = result.value("problem", json::object());
  r.level = row.contains("level") && row["level"].is_number()
                ? std::optional(row["level"].get<int>())
                : std::nullopt;
  r.problem = (r.level ? fmt::format("level{}/", *r.level) : std::string()) +
              problem.value("name", row.value("problem_name", std::string("?")));
  r.verdict = result.value("verdict", "");
  r.reason = result.value("reason", "");
  const json plan = problem.value("reference", json::object()).value("plan", json::object());
  r.fits = plan.value("fits", "");
  r.alone = plan.value("alone", false);
  r.seconds = result.value("durations_s", json::object()).value("total", 0.0);
  r.degenerate = problem.value("degenerate", false);
  const json audit = problem.value("audit", json::object());
  r.degenerate_why = audit.value("degenerate_why", "");
  r.reference_fails_float64 =
      static_cast<int>(audit.value("reference_fails_float64", json::array()).size());
  // Named locals: items() of a temporary would outlive it.
  const json figures = audit.value("figures", json::object());
  const json normwise = figures.value("reference_vs_truth_normwise", json::object());
  for (const auto& [id, value] : normwise.items()) {
    if (value.is_number()) {
      r.worst_reference_normwise =
          std::max(r.worst_reference_normwise.value_or(0.0), value.get<double>());
    }
  }
  // `correctness` is an object by family (an array in the C++ record before serialisation).
  const json correctness = result.value("correctness", json::object());
  for (const auto& family : correctness) {
    if (!family.is_object()) continue;
    for (const auto& c : family.value("cases", json::array())) {
      if (c.value("truth", "float64") == "float32") ++r.truth_float32;
      r.truth_chunks = std::max(r.truth_chunks, c.value("truth_chunks", 1));
      if (c.contains("truth_rows_note") && c["truth_rows_note"].is_string()) {
        r.truth_rows_note = c["truth_rows_note"].get<std::string>();
      }
      bool over = false;
      // An integer output has no budget of this kind: a case is counted when a floating
      // output was judged against the floor and none needed its sensitivity.
      bool floor_seen = false, sensitivity_measured = false;
      for (const auto& o : c.value("outputs", json::array())) {
        const std::string budget = o.value("budget", "");
        floor_seen = floor_seen || budget == "floor";
        sensitivity_measured = sensitivity_measured || budget.starts_with("sensitivity");
        const json excess = o.value("reference_vs_budget", json::object());
        if (excess.value("elements_over", 0) <= 0) continue;
        over = true;
        if (const auto ratio = number_at(excess, "/budget_ratio"_json_pointer)) {
          r.worst_reference_budget_ratio =
              std::max(r.worst_reference_budget_ratio.value_or(0.0), *ratio);
        }
      }
      r.reference_over_budget += over;
      r.floor_judged += floor_seen && !sensitivity_measured;
    }
  }
  r.tf32_ms = number_at(result, "/timing/baseline_tf32/median_ms"_json_pointer);
  r.fp32_ms = number_at(result, "/timing/baseline_fp32/median_ms"_json_pointer);
  if (r.tf32_ms && r.fp32_ms && *r.tf32_ms > 0) r.fp32_over_tf32 = *r.fp32_ms / *r.tf32_ms;
  r.self_speedup = number_at(result, "/speedup/vs_tf32/value"_json_pointer);
  r.self_low = number_at(result, "/speedup/vs_tf32/ci_low"_json_pointer);
  r.self_high = number_at(result, "/speedup/vs_tf32/ci_high"_json_pointer);
  r.peak_bytes = number_at(result, "/memory/reference_peak_bytes"_json_pointer);
  r.copy_kernels = kernels_per_call(result, "candidate");
  r.tf32_kernels = kernels_per_call(result, "baseline_tf32");
  std::tie(r.copy_signature, r.copy_top_kernel) = kernel_signature(result, "candidate");
  std::tie(r.tf32_signature, r.tf32_top_kernel) = kernel_signature(result, "baseline_tf32");
  for (const auto& f : result.value("flags", json::array())) {
    const std::string id = f.value("id", "");
    r.copy_plans_squeezed |= id == "plans_under_pressure";
    // Expected of a reference run as a candidate (PyTorch does its work): not a finding.
    if (id == "library_main_op" || id == "kernel_never_called" || id == "no_custom_kernel") {
      continue;
    }
    if (f.value("severity", "") != "info") {
      r.flags.push_back(f.value("severity", "") + ":" + f.value("id", ""));
    }
  }
  return r;
}

std::vector<AuditRow> audit_rows(const std::vector<json>& results) {
  std::vector<AuditRow> rows;
  for (const auto& result : results) rows.push_back(audit_row(result));
  std::sort(rows.begin(), rows.end(), [](const AuditRow& a, const AuditRow& b) {
    return std::pair(a.level.value_or(0), a.problem) < std::pair(b.level.value_or(0), b.problem);
  });
  return rows;
}

std::string render_audit(const std::vector<AuditRow>& rows, Format format) {
  if (format == Format::Json) {
    json out = json::array();
    for (const auto& r : rows) out.push_back(to_json(r));
    return out.dump(2) + "\n";
  }
  if (format == Format::Csv) {
    std::string out =
        "problem,verdict,fits,alone,seconds,degenerate,reference_fails_float64,"
        "worst_reference_normwise,reference_over_budget_cases,worst_reference_budget_ratio,"
        "floor_judged_cases,truth_float32_cases,truth_chunks,tf32_ms,fp32_ms,fp32_over_tf32,"
        "self_speedup,self_ci_low,self_ci_high,peak_bytes,copy_kernels_per_call,"
        "tf32_kernels_per_call,flags,reason\n";
    for (const auto& r : rows) {
      std::string flags;
      for (const auto& f : r.flags) flags += (flags.empty() ? "" : " ") + f;
      out += fmt::format(
          "{},{},{},{},{:.2f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
          escape_csv(r.problem), r.verdict, escape_csv(r.fits), r.alone, r.seconds, r.degenerate,
          r.reference_fails_float64, cell(r.worst_reference_normwise, "{:.3g}"),
          r.reference_over_budget, cell(r.worst_reference_budget_ratio, "{:.3g}"), r.floor_judged,
          r.truth_float32, r.truth_chunks, cell(r.tf32_ms, "{:.6g}"), cell(r.fp32_ms, "{:.6g}"),
          cell(r.fp32_over_tf32, "{:.4g}"), cell(r.self_speedup, "{:.4g}"),
          cell(r.self_low, "{:.4g}"), cell(r.self_high, "{:.4g}"), cell(r.peak_bytes, "{:.0f}"),
          cell(r.copy_kernels, "{:g}"), cell(r.tf32_kernels, "{:g}"), escape_csv(flags),
          escape_csv(r.reason));
    }
    return out;
  }
  std::string out =
      "| problem | self-check | fits | eval s | degenerate | ref vs float64 | FP32/TF32 | "
      "self speedup [95% CI] | peak GiB |\n|---|---|---|---|---|---|---|---|---|\n";
  int correct = 0, degenerate = 0, unstable = 0, fallback = 0, alone = 0, over_budget = 0,
      plans_differ = 0;
  double seconds = 0;
  for (const auto& r : rows) {
    correct += r.verdict == "correct";
    degenerate += r.degenerate;
    unstable += r.reference_fails_float64 > 0;
    over_budget += r.reference_over_budget > 0;
    fallback += r.truth_float32 > 0;
    alone += r.alone;
    seconds += r.seconds;
    plans_differ += r.plans_differ();
    std::string self = r.self_speedup ? fmt::format("{} [{}, {}]", ratio(r.self_speedup, 4),
                                                    ratio(r.self_low, 4), ratio(r.self_high, 4))
                                      : "";
    if (r.plans_differ()) {
      if (r.kernel_counts_differ()) {
        self += fmt::format(
            "; other plans: {:g} kernels a call in the copy, {:g} in the TF32 "
            "baseline",
            *r.copy_kernels, *r.tf32_kernels);
      } else {
        self += fmt::format(
            "; other plans: other kernels in the copy ({}) than in the TF32 "
            "baseline ({})",
            r.copy_top_kernel.substr(0, 60), r.tf32_top_kernel.substr(0, 60));
      }
    }
    if (r.copy_plans_squeezed) self += "; the copy's plans chosen under memory pressure";
    std::string check = r.verdict == "correct" ? "correct" : r.verdict + ": " + r.reason;
    std::string reference = r.reference_fails_float64 > 0
                                ? fmt::format("fails on {} ({})", r.reference_fails_float64,
                                              cell(r.worst_reference_normwise, "{:.2g}"))
                                : cell(r.worst_reference_normwise, "{:.1e}");
    if (r.reference_over_budget > 0) {
      reference += fmt::format("; over its elementwise budget on {} ({}x)", r.reference_over_budget,
                               cell(r.worst_reference_budget_ratio, "{:.2g}"));
    }
    if (r.truth_float32 > 0) reference += fmt::format("; float32 truth on {}", r.truth_float32);
    std::string fits = r.fits;
    if (r.truth_chunks > 1) {
      fits += fmt::format("; float64 truth in {} chunks of rows", r.truth_chunks);
    } else if (!r.truth_rows_note.empty()) {
      fits += "; float64 truth in one run: " + r.truth_rows_note;
    }
    out += fmt::format("| {} | {} | {} | {:.1f} | {} | {} | {} | {} | {} |\n", r.problem,
                       escape_md(check.substr(0, 160)), escape_md(fits), r.seconds,
                       r.degenerate ? escape_md(r.degenerate_why) : "", reference,
                       ratio(r.fp32_over_tf32), self, gib(r.peak_bytes));
  }
  out += fmt::format(
      "\n{} problems: {} pass their own verified check, {} degenerate, {} where the TF32 "
      "reference fails its float64 run, {} where it is over its own elementwise budget on some "
      "case (its excess admitted), {} with a float32 truth on some case, {} needing the "
      "device's memory to themselves, {} where the TF32 baseline ran other kernels than the "
      "reference's copy (a library's plan chosen per process: the self speedup measures it); "
      "{:.0f} s of evaluation summed.\n",
      rows.size(), correct, degenerate, unstable, over_budget, fallback, alone, plans_differ,
      seconds);
  return out;
}

}  // namespace kbv::report
