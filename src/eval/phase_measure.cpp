// The measurement of a correct candidate: the timing run (its loop is eval/measurement.cpp;
// here the workers are reached and what they return judged), the roofline floor, and memory.
#include <fmt/format.h>

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

TimingRecord measure_timing(CandidateSide& side, const json& prepared,
                            const EvalSettings& settings) {
  TimingRecord out;
  const bool cuda = settings.cuda();
  auto response = side.workers.candidate(worker_request(
      cmd::kPrepareTiming,
      {{"state", prepared["cases"][0]["state"]}, {"inputs", prepared["timing_inputs"]}}));
  if (!response.ok()) {
    out.failed = judge::call_failure(response, "loading the timing inputs");
    return out;
  }
  // The last output of each timing set is saved by the candidate and judged against the golden
  // output of the case those inputs came from (T5, T6).
  std::vector<const json*> timing_cases;
  json timed_outputs = json::array();
  for (const auto& golden : prepared["timing_golden"]) {
    timed_outputs.push_back(side.files.timed_output(timing_cases.size()).string());
    timing_cases.push_back(&golden);
  }
  auto call_side = [&](const std::string& who, const json& request) -> std::optional<json> {
    json sent = request;
    if (who != "cand") {
      sent["variant"] = who;
      Response timed = side.workers.reference(sent);
      require_reference_answer(timed, side.problem, "timing the baseline");
      return timed.result;
    }
    if (request["cmd"] == cmd::kTime) {
      sent["outputs"] = timed_outputs;
      sent["max_output_bytes"] = CaseFiles::output_limit(timing_cases);
    }
    Response timed = side.workers.candidate(sent, side.workers.call_timeout() * 2);
    if (!timed.ok()) {
      out.failed = judge::call_failure(timed, "timing");
      return std::nullopt;
    }
    side.calls.call_state(timed.result, "timing", side.findings);
    for (int i : timed.result.value("saved_outputs", json::array())) {
      if (i < 0 || i >= static_cast<int>(timing_cases.size()) || !timing_cases[i]) continue;
      auto judged = CaseFiles::judge(*timing_cases[i], timed_outputs[i].get<std::string>(),
                                     side.protocol, side.findings);
      if (!judged.passed) {
        side.findings.add("timed_output_wrong", Severity::Reject,
                          fmt::format("the output of a timed call on {} is wrong ({}) although "
                                      "the same inputs passed when checked",
                                      (*timing_cases[i])["id"].get<std::string>(), judged.reason));
      }
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
  if (!timing.ok) return out;
  out.ok = true;
  out.timing = timing.timing;
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
  double cand_peak = cand.result.value("peak_bytes", 0.0);
  double ref_peak = ref.value("peak_bytes", 0.0);
  out.memory = {{"candidate_peak_bytes", cand.result["peak_bytes"]},
                {"reference_peak_bytes", ref["peak_bytes"]},
                {"peak_ratio", ref_peak > 0 ? json(cand_peak / ref_peak) : json(nullptr)},
                {"candidate_persistent_bytes", cand.result["persistent_bytes"]},
                {"reference_persistent_bytes", ref["persistent_bytes"]},
                {"method", cand.result["method"]},
                {"partial", cand.result.value("partial", false) || ref.value("partial", false)},
                {"candidate_detail", cand.result},
                {"reference_detail", ref}};
  return out;
}

}  // namespace kbv::eval
