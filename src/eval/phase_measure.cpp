// The measurement of a correct candidate: the timing run (its loop is eval/measurement.cpp;
// here the workers are reached and what they return judged), the roofline floor, and memory.
#include <fmt/format.h>

#include <algorithm>

#include "eval/measurement.hpp"
#include "eval/phases.hpp"
#include "judge/roofline.hpp"
#include "stats/summary.hpp"

namespace kbv::eval {
using nlohmann::json;
using orchestrate::Response;
using orchestrate::worker_request;
namespace cmd = orchestrate::cmd;
using Clock = std::chrono::steady_clock;

TimingRecord measure_timing(CandidateSide& side, int timing_sets, const EvalSettings& settings) {
  TimingRecord out;
  const bool cuda = settings.cuda();
  // Both sides are timed on the same shared inputs (the reference's blocks); the golden
  // outputs of those inputs under the initial state stay in the reference's worker.
  json golden;
  if (auto failed = side.cases.prepare_timing(timing_sets, golden)) {
    out.failed = judge::call_failure(*failed, "loading the timing inputs");
    return out;
  }
  // The last output of each timing set is copied into the slot by the candidate and judged
  // against the golden output of those inputs (T5, T6).
  auto judge_timed = [&](int i) -> bool {
    auto emitted = side.workers.candidate(worker_request(cmd::kEmitTimedOutput, {{"index", i}}));
    if (!emitted.ok()) {
      out.failed = judge::call_failure(emitted, "copying a timed call's output");
      return false;
    }
    if (emitted.result.value("structure", json()).is_null()) return true;
    const json& g = golden[i];
    auto judged = side.cases.judge(g, emitted.result, "", i);
    if (!judged.outputs.passed) {
      side.findings.add("timed_output_wrong", Severity::Reject,
                        fmt::format("the output of a timed call on {} is wrong ({}) although "
                                    "the same inputs passed when checked",
                                    g["id"].get<std::string>(), judged.outputs.reason));
    }
    return true;
  };
  auto call_side = [&](const std::string& who, const json& request) -> std::optional<json> {
    json sent = request;
    if (who != "cand") {
      sent["variant"] = who;
      Response timed = side.workers.reference(sent);
      require_reference_answer(timed, side.problem, "timing the baseline");
      return timed.result;
    }
    Response timed = side.workers.candidate(sent, side.workers.call_timeout() * 2);
    if (!timed.ok()) {
      out.failed = judge::call_failure(timed, "timing");
      return std::nullopt;
    }
    side.calls.call_state(timed.result, "timing", side.findings);
    for (const auto& i : timed.result.value("last_outputs", json::array())) {
      const int index = i.get<int>();
      if (index < 0 || index >= static_cast<int>(golden.size())) continue;
      if (!judge_timed(index)) return std::nullopt;
    }
    if (timed.result.value("synchronizes_internally", false)) {
      side.findings.add("forward_synchronizes", Severity::Info,
                        "the forward waits for the device before returning, so launch latency "
                        "could not be hidden; timed unblocked");
    }
    return timed.result;
  };
  auto plan =
      plan_timing(settings.timing_profile, settings.timing_samples, settings.timing_rounds, cuda);
  auto exclusive = side.workers.exclusive();  // nothing else runs on the device while this times
  auto started = Clock::now();
  auto timing = run_timing(plan, call_side, cuda, side.progress);
  out.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  exclusive.release();
  // The baseline was timed on the inputs the candidate was timed on: had the candidate changed
  // them, the baseline's time would be of other work.
  for (const auto& i : side.cases.changed_timing_inputs()) {
    side.findings.add("inputs_mutated", Severity::Reject,
                      fmt::format("the forward changed the inputs of timing set {} in place while "
                                  "it was timed (the baseline is timed on the same inputs)",
                                  i.dump()));
  }
  if (!timing.ok) return out;
  out.ok = true;
  out.timing = timing.timing;
  // Timing sets whose golden outputs are their case's own (drawn under the initial state), not
  // computed again by the reference's forwards (python/kbv/reference.py _timing_outputs).
  int from_cases = 0;
  for (const auto& g : golden) from_cases += g.value("from_case", false) ? 1 : 0;
  out.timing["sets"] = {{"count", golden.size()}, {"outputs_from_cases", from_cases}};
  const auto& s = timing.samples;
  out.speedup["vs_tf32"] = stats::speedup(s.at("tf32"), s.at("cand")).to_json();
  out.speedup["vs_fp32"] = stats::speedup(s.at("fp32"), s.at("cand")).to_json();
  out.speedup["headline"] = side.protocol.headline == Headline::Tf32 ? "vs_tf32" : "vs_fp32";
  out.candidate_samples = s.at("cand");
  return out;
}

json check_roofline(CandidateSide& side, bool cuda, const std::string& device_name,
                    const std::vector<double>& candidate_samples, json& session_roofline) {
  if (!cuda || candidate_samples.empty()) {
    side.findings.add("roofline_skipped", Severity::Info,
                      "the roofline floor is only checked on CUDA devices");
    return {{"skipped", "no device peaks on the CPU"}};
  }
  auto peaks = judge::documented_peaks(device_name);
  if (session_roofline.is_null()) {
    auto r = side.workers.reference(
        worker_request(cmd::kRoofline, {{"measure_peaks", !peaks.has_value()}}));
    if (!r.ok()) {
      return {
          {"skipped", "the reference could not count its cost: " + judge::first_line(r.message)}};
    }
    session_roofline = r.result;
  }
  const json& c = session_roofline;
  if (!peaks) {
    json m = c.value("measured_peaks", json::object());
    peaks =
        judge::from_measured(m.value("copy_bytes_per_s", 0.0), m.value("matmul_flops_per_s", 0.0));
  }
  judge::ReferenceCost cost{c.value("flops", 0.0),
                            c.value("input_bytes", 0.0) + c.value("state_bytes", 0.0),
                            c.value("output_bytes", 0.0), c.value("l2_bytes", 0.0)};
  auto check = judge::assess_roofline(cost, *peaks, stats::summarize(candidate_samples).median);
  json record = check.to_json();
  record["peaks"] = peaks->to_json();
  record["reference"] = c;
  judge::judge_roofline(check, cost, *peaks, side.findings);
  return record;
}

std::optional<double> memory_peak_ratio(double candidate_peak, double reference_peak,
                                        const std::string& method) {
  if (method.starts_with("process_peak_rss")) {
    candidate_peak = std::max(candidate_peak, kHostPeakResolutionBytes);
    reference_peak = std::max(reference_peak, kHostPeakResolutionBytes);
  }
  if (!(reference_peak > 0)) return std::nullopt;
  return candidate_peak / reference_peak;
}

MemoryRecord measure_memory(CandidateSide& side, json& session_memory) {
  MemoryRecord out;
  side.say("measuring memory");
  auto cand = side.workers.candidate(worker_request(cmd::kMemory));
  if (!cand.ok()) {
    out.failed = judge::call_failure(cand, "the memory measurement");
    return out;
  }
  judge::CallJudge::harness(cand.result, "measuring memory", side.findings);
  if (session_memory.is_null()) {
    auto ref = side.workers.reference(worker_request(cmd::kMemory));
    require_reference_answer(ref, side.problem, "measuring the baseline's memory");
    session_memory = ref.result;
  }
  const json& ref = session_memory;
  const auto ratio =
      memory_peak_ratio(cand.result.value("peak_bytes", 0.0), ref.value("peak_bytes", 0.0),
                        cand.result.value("method", ""));
  out.memory = {{"candidate_peak_bytes", cand.result["peak_bytes"]},
                {"reference_peak_bytes", ref["peak_bytes"]},
                {"peak_ratio", ratio ? json(*ratio) : json(nullptr)},
                {"candidate_persistent_bytes", cand.result["persistent_bytes"]},
                {"reference_persistent_bytes", ref["persistent_bytes"]},
                {"method", cand.result["method"]},
                {"partial", cand.result.value("partial", false) || ref.value("partial", false)},
                {"candidate_detail", cand.result},
                {"reference_detail", ref}};
  return out;
}

}  // namespace kbv::eval
