// The traces of one forward: the dispatcher's operators (B1, B2) before timing, and the GPU's
// kernels with their streams (T1, B1, B2) after it.
#include "eval/phases.hpp"
#include "judge/kernel_trace.hpp"

namespace kbv::eval {
using nlohmann::json;
using orchestrate::worker_request;
namespace cmd = orchestrate::cmd;

namespace {

void add_trace_flag(CandidateSide& side, const Flag& flag) {
  side.findings.add(flag.id,
                    judge::trace_flag_severity(flag, side.protocol.name == "verified", side.audit),
                    flag.detail);
}

}  // namespace

TraceRecord trace_operators(CandidateSide& side, const json& c) {
  TraceRecord out;
  auto cand = side.cases.trace(c, "ops");
  if (!cand.ok()) {
    out.failed = judge::call_failure(cand, "tracing the forward's operators");
    return out;
  }
  side.calls.call_state(cand.result, "tracing the forward", side.findings);
  auto ref = side.workers.reference(worker_request(cmd::kTrace, {{"id", c["id"]}}));
  require_reference_answer(ref, side.problem, "tracing the reference's operators");
  out.operators = judge::assess_trace(ref.result, cand.result);
  out.record = out.operators->record;
  // kernel_never_called waits for the kernel trace, which may clear it (a CUDA graph replays
  // the candidate's own kernels without calling its extension).
  for (const auto& flag : out.operators->flags) {
    if (flag.id == "library_main_op") add_trace_flag(side, flag);
  }
  return out;
}

void trace_kernels(CandidateSide& side, const json& c, const json& scan, TraceRecord& trace) {
  std::vector<Flag> flags;
  for (const auto& flag : trace.operators->flags) {
    if (flag.id != "library_main_op") flags.push_back(flag);
  }
  json& record = trace.operators->record;
  auto cand = side.cases.trace(c, "gpu");
  if (!cand.ok()) {
    trace.failed = judge::call_failure(cand, "tracing the forward's kernels");
    return;
  }
  side.calls.call_state(cand.result, "tracing the forward's kernels", side.findings);
  if (cand.result.contains("gpu")) {
    // A candidate whose own kernels ran (a CUDA graph replays them without calling the
    // extension) is not a ghost even when the extension-call count says so.
    const json& gpu = cand.result["gpu"];
    std::vector<std::string> own;
    for (const auto& k : scan.value("kernels", json::array())) own.push_back(k.get<std::string>());
    int calls = 0;
    const json extension_calls = record.value("extension_calls", json::object());
    for (const auto& [name, count] : extension_calls.items()) {
      calls += count.get<int>();
    }
    calls = gpu.value("extension_calls", calls);  // counted in the traced forward itself
    bool heavy = !record.value("reference_heavy", json::array()).empty();
    auto assessed = judge::assess_kernel_trace(gpu, own, heavy, calls);
    record["gpu"] = assessed.record;
    if (assessed.own_kernels_ran) {
      std::erase_if(flags, [](const Flag& f) { return f.id == "kernel_never_called"; });
    }
    flags.insert(flags.end(), assessed.flags.begin(), assessed.flags.end());
  }
  trace.record = record;
  for (const auto& flag : flags) add_trace_flag(side, flag);
}

}  // namespace kbv::eval
