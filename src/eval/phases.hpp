// The phases of one evaluation after both workers are up (eval/evaluator.cpp drives them in
// order, like Google Benchmark's BenchmarkRunner): each takes what it needs and returns a typed
// record; the evaluator folds the records into the result and decides the verdict from them.
// Flags go into the evaluation's Findings as they are found (one per id, first evidence kept),
// because several phases can raise the same one.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "eval/case_path.hpp"
#include "eval/exchange.hpp"
#include "eval/protocol.hpp"
#include "judge/call_findings.hpp"
#include "judge/findings.hpp"
#include "judge/operator_trace.hpp"
#include "judge/stage_failure.hpp"

namespace kbv::eval {

// What every phase on the candidate's side works with.
struct CandidateSide {
  const std::filesystem::path& problem;  // a failed reference call names it (UsageError)
  WorkerExchange& workers;
  const Protocol& protocol;
  CasePath& cases;
  judge::Findings& findings;
  judge::CallJudge& calls;
  std::function<void(const std::string&)> progress;
  bool audit = false;  // kbv audit: the candidate is the reference itself
  // --allow-library: the flags that say PyTorch or a library did the work are warnings.
  bool allow_library = false;
  bool cuda = false;  // a CUDA device: the GPU kernel trace decides no_custom_kernel

  void say(const std::string& line) const {
    if (progress) progress(line);
  }
};

// -- correctness: every hidden case, then the re-checks ------------------------------------------
struct CorrectnessRecord {
  std::vector<FamilyResult> families;        // every family of the protocol, in its order
  std::optional<judge::FailedStage> failed;  // a forward that did not complete
  bool all_passed() const;
};
// Each case is made resident in the reference when its turn comes (drawn, or kept), so the
// candidate's run streams through cases that do not all fit at once.
CorrectnessRecord check_correctness(CandidateSide& side, nlohmann::json& cases);

// Re-checks of a candidate that passed every case (S5, S2): determinism, fresh values in reused
// buffers, reused values in fresh buffers.
struct RecheckRecord {
  nlohmann::json record = nlohmann::json::object();  // result.candidate.rechecks
  std::optional<judge::FailedStage> failed;
  std::optional<nlohmann::json> trace_case;  // the case the traces run on (when they passed)
};
RecheckRecord run_rechecks(CandidateSide& side, nlohmann::json& cases);

// -- traces (B1, B2, T1) ---------------------------------------------------------------------
struct TraceRecord {
  std::optional<judge::TraceAssessment> operators;  // the dispatcher trace (before timing)
  nlohmann::json record;                            // result.candidate.trace
  std::optional<judge::FailedStage> failed;
};
// The dispatcher trace; library_main_op is decided here, before timing, so a forward that
// leaves the main computation to PyTorch is rejected untimed. no_custom_kernel waits for the
// kernel trace (on CUDA a Triton kernel is invisible to the dispatcher), after timing.
TraceRecord trace_operators(CandidateSide& side, const nlohmann::json& c);
// The GPU kernel trace (also on the CPU, where the answer is "not a CUDA device"), then the
// operator trace's other findings; `scan` is the static scan (the candidate's own kernels).
// no_custom_kernel: from the GPU kernels when the trace saw any, else from the dispatcher.
void trace_kernels(CandidateSide& side, const nlohmann::json& c, const nlohmann::json& scan,
                   TraceRecord& trace);

// -- measurement -------------------------------------------------------------------------------
struct TimingRecord {
  bool ok = false;
  nlohmann::json timing = nullptr;  // result.timing
  nlohmann::json speedup = nlohmann::json::object();
  std::vector<double> candidate_samples;
  double seconds = 0;  // the timing run itself, under the exclusive gate
  std::optional<judge::FailedStage> failed;
};
// The timing sets are prepared here (`timing_sets` of them, as the memory plan allows) and stay
// until measure_memory is done; the evaluator ends them (CasePath::end_timing).
TimingRecord measure_timing(CandidateSide& side, int timing_sets, const EvalSettings& settings);

// The roofline floor against the candidate's median; the reference's cost is counted once per
// session (kept in `session_roofline`).
nlohmann::json check_roofline(CandidateSide& side, bool cuda, const std::string& device_name,
                              const std::vector<double>& candidate_samples,
                              nlohmann::json& session_roofline);

// The candidate's peak over the reference's, `peak_ratio` in result.memory; nullopt without a
// reference peak. Measured on the host (resident-set growth, `process_peak_rss`), a peak under
// kHostPeakResolutionBytes counts as that much: page faults and the allocator's reuse decide
// figures that small (an honest CPU ReLU with a 64 KiB output: 213 KB against the reference's
// 82 KB, a ratio of 2.6 from nothing the candidate did), and a reward that charges for raised
// memory would charge for them. Device figures (the memory trace) are exact and taken as they are.
inline constexpr double kHostPeakResolutionBytes = 1 << 20;
std::optional<double> memory_peak_ratio(double candidate_peak, double reference_peak,
                                        const std::string& method);

struct MemoryRecord {
  nlohmann::json memory = nullptr;  // result.memory
  std::optional<judge::FailedStage> failed;
};
// The baseline's memory does not depend on the candidate: measured once per session (kept in
// `session_memory`).
MemoryRecord measure_memory(CandidateSide& side, nlohmann::json& session_memory);

}  // namespace kbv::eval
