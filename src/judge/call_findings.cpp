#include "judge/call_findings.hpp"

#include <fmt/format.h>

namespace kbv::judge {
using nlohmann::json;

// Any change of a global numerics flag is a warning (it is put back after every call). A
// precision flag lowered below the baseline's TF32 (bf16 matmul precision, reduced-precision
// reductions, a half default dtype) again after being put back, i.e. one the forward itself
// keeps lowering, is a reject: it changes the candidate's own arithmetic behind the tolerance
// policy (E3). Raising precision (IEEE, "highest") is only ever a warning.
void CallJudge::numerics(const json& answer, Findings& out) {
  if (!answer.contains("numerics_changed") || answer["numerics_changed"].empty()) return;
  const auto& changed = answer["numerics_changed"];
  out.add("numerics_flags_changed", Severity::Warn,
          "the candidate changed global numerics settings (put back before any measurement): " +
              changed.dump());
  bool lowered = false;
  for (const auto& [key, values] : changed.items()) {
    if (!values.is_array() || values.size() != 2) continue;
    const auto& now = values[1];
    if (key == "float32_matmul_precision") lowered |= now == "medium";
    if (key == "matmul_fp32_precision" || key == "cudnn_conv_fp32_precision") {
      lowered |= now == "bf16";
    }
    if (key == "matmul_allow_fp16_reduced_precision" ||
        key == "matmul_allow_bf16_reduced_precision") {
      lowered |= now == true;
    }
    if (key == "default_dtype") lowered |= now == "torch.float16" || now == "torch.bfloat16";
  }
  if (lowered && ++precision_lowerings_ >= 2) {
    out.add("precision_flags_changed", Severity::Reject,
            "the candidate's forward keeps lowering precision flags (they were put back after "
            "each call and lowered again): " +
                changed.dump());
  }
}

// T4: timing or harness entry points replaced (they are put back by the worker).
void CallJudge::harness(const json& answer, const std::string& during, Findings& out) {
  if (answer.contains("harness_tampered") && !answer["harness_tampered"].empty()) {
    out.add("harness_tampered", Severity::Reject,
            fmt::format("timing or harness functions were replaced while {}: {}", during,
                        answer["harness_tampered"].dump()));
  }
}

// T7: a persisting-L2 set-aside or access-policy window the candidate left set. The worker puts
// it back after every call and the timer before every sample, so it cannot pay off.
void CallJudge::l2(const json& answer, const std::string& during, Findings& out) {
  if (!answer.contains("l2_persisting") || answer["l2_persisting"].empty()) return;
  out.add("l2_persisting_changed", Severity::Warn,
          fmt::format("the candidate set persisting L2 while {} (reset after every call and "
                      "before every timed sample): {}",
                      during, answer["l2_persisting"].dump()));
}

// T2: a thread left running by the forward, and outputs that changed after it returned.
void CallJudge::watch(const json& answer, const std::string& case_id, Findings& out) {
  if (!answer.contains("watch")) return;
  const auto& w = answer["watch"];
  bool changed = !w["outputs_changed_after_return"].empty();
  const json rewritten = w.value("copies_rewritten_after_return", json::array());
  if (changed) {
    out.add("output_changed_after_return", Severity::Reject,
            fmt::format("output {} changed after the forward returned on {} (work finished "
                        "later, outside any timed region){}",
                        w["outputs_changed_after_return"].dump(), case_id,
                        rewritten.empty() ? ""
                                          : fmt::format("; the harness's copy of output {} was "
                                                        "written after it was taken",
                                                        rewritten.dump())));
  }
  if (!w["threads_left_running"].empty()) {
    std::string detail = fmt::format(
        "the forward returned with thread(s) {} still running on {}{}",
        w["threads_left_running"].dump(), case_id,
        changed ? "; the output changed after they finished" : "; the output did not change");
    out.raise("background_thread", changed ? Severity::Reject : Severity::Warn, detail);
  }
}

// A library plan the candidate's forward chose while an allocation ran out of device memory
// (cuDNN skips a plan whose workspace it cannot have and keeps the next for the process): its
// timing may be slower than the same code runs with room. Said, never judged; with the device
// shared, the run evaluates it again alone (schedule/retry_alone).
void CallJudge::plans(const json& answer, Findings& out) {
  const json pressured = answer.value("plans_under_pressure", json::object());
  if (!pressured.is_object() || pressured.empty()) return;
  const auto& [mode, seen] = *pressured.items().begin();
  const double gib = 1024.0 * 1024.0 * 1024.0;
  out.add("plans_under_pressure", Severity::Info,
          fmt::format("the candidate's forward ({}) chose a library plan while an allocation of "
                      "{:.2f} GiB ran out of device memory ({:.2f} GiB free); the plan it fell "
                      "back to is kept for its process, and may time it slower than with room",
                      seen.value("where", mode), seen.value("bytes", 0.0) / gib,
                      seen.value("free_bytes", 0.0) / gib));
}

void CallJudge::call_state(const json& answer, const std::string& during, Findings& out) {
  numerics(answer, out);
  harness(answer, during, out);
  l2(answer, during, out);
  plans(answer, out);
}

void CallJudge::forward(const json& answer, const std::string& case_id, Findings& out) {
  call_state(answer, "running the forward on " + case_id, out);
  watch(answer, case_id, out);
}

void judge_static_scan(const json& scan, Findings& out) {
  const json findings = scan.value("findings", json::object());
  for (const auto& [id, finding] : findings.items()) {
    auto severity = finding.value("severity", "info") == "warn" ? Severity::Warn : Severity::Info;
    std::string evidence;
    for (const auto& e : finding.value("evidence", json::array())) {
      evidence += (evidence.empty() ? "" : "; ") + e.get<std::string>();
    }
    out.add(id, severity,
            fmt::format("static scan: {} ({})", finding.value("meaning", ""), evidence));
  }
}

}  // namespace kbv::judge
