// The traces of one forward: the dispatcher's operators (B1, B2) before timing, and the GPU's
// kernels with their streams (T1, B1, B2) after it; no_custom_kernel is decided with the second,
// from the GPU kernels where they were traced, else from the dispatcher's evidence.
#include <fmt/format.h>

#include "eval/phases.hpp"
#include "judge/kernel_trace.hpp"

namespace kbv::eval {
using nlohmann::json;
using orchestrate::worker_request;
namespace cmd = orchestrate::cmd;

namespace {

void add_trace_flag(CandidateSide& side, const Flag& flag) {
  const judge::LibraryPolicy policy{side.protocol.name == "verified", side.allow_library,
                                    side.audit};
  side.findings.add(flag.id, judge::trace_flag_severity(flag, policy), flag.detail);
}

std::vector<std::string> names(const json& list) {
  std::vector<std::string> out;
  for (const auto& item : list) out.push_back(item.get<std::string>());
  return out;
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
  // kernel_never_called and no_custom_kernel wait for the kernel trace, which may clear the
  // first (a CUDA graph replays the candidate's own kernels without calling its extension) and
  // decides the second on CUDA (a kernel launched outside the dispatcher is the candidate's).
  for (const auto& flag : out.operators->flags) {
    if (flag.id == "library_main_op") add_trace_flag(side, flag);
  }
  return out;
}

void trace_kernels(CandidateSide& side, const json& c, const json& scan, TraceRecord& trace) {
  std::vector<Flag> flags;
  std::optional<Flag> no_custom_kernel;  // the dispatcher's, unless the kernels decide
  for (const auto& flag : trace.operators->flags) {
    if (flag.id == "no_custom_kernel") {
      no_custom_kernel = flag;
    } else if (flag.id != "library_main_op") {
      flags.push_back(flag);
    }
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
    judge::OwnKernels own{names(scan.value("kernels", json::array())),
                          names(scan.value("triton_kernels", json::array()))};
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
    for (auto& flag : assessed.flags) {
      if (flag.id != "no_custom_kernel") flags.push_back(flag);
    }
    if (assessed.available && assessed.decides_custom_code) {
      // The GPU's own account of who computed decides: a Triton or raw-driver kernel is the
      // candidate's although the dispatcher saw nothing of it, and an extension that only calls
      // PyTorch or cuBLAS launches none of its own.
      no_custom_kernel.reset();
      for (const auto& flag : assessed.flags) {
        if (flag.id == "no_custom_kernel") no_custom_kernel = flag;
      }
    } else if (no_custom_kernel && side.cuda) {
      no_custom_kernel->detail +=
          fmt::format(" (decided from the dispatcher: the GPU kernel trace {})",
                      !assessed.available     ? "was unavailable: " + gpu.value("why", "")
                      : assessed.kernels == 0 ? std::string("saw no kernel")
                                              : std::string("saw only part of the kernels"));
    }
  }
  if (no_custom_kernel) flags.push_back(*no_custom_kernel);
  trace.record = record;
  for (const auto& flag : flags) add_trace_flag(side, flag);
}

}  // namespace kbv::eval
