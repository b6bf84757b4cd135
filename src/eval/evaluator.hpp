// Evaluation of one candidate against one problem, end to end: the reference worker draws the
// families and computes golden outputs, the sandboxed candidate worker runs the candidate, and
// this process compares, times, audits and decides. Neither worker ever sees the other's code.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/result.hpp"

namespace kbv::orchestrate {
class WorkerProcess;
}

namespace kbv::eval {

struct ReferenceSlot;
struct ReferenceSession;
class DeviceGate;
struct CandidateWorker;

// A fault of the user's input that is not the candidate's (a malformed problem, no GPU for
// --device cuda): kbv exits non-zero with this message instead of a verdict.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct EvalRequest {
  std::filesystem::path problem;
  std::filesystem::path candidate;
  std::string device = "cpu";         // cpu, cuda, cuda:N
  std::string protocol = "verified";  // verified, kbv-paper, standard
  std::string size = "small";         // KBV_SIZE for the problem files of the bundled suite
  int hidden_draws = 3;
  std::string timing_profile = "standard";  // quick, standard, precise (stats/sampling.hpp)
  int timing_samples = 0;  // per variant; > 0 fixes the count (no adaptive stopping)
  int timing_rounds = 0;   // interleaved rounds; > 0 fixes the count
  bool measure = true;     // time and measure memory (correct candidates only)
  std::chrono::seconds compile_timeout{900};
  std::chrono::seconds call_timeout{120};
  std::filesystem::path cache_dir;  // build cache of candidate extensions, keyed by content
  std::filesystem::path work_dir;   // where run directories are made (default: temp dir)
  bool keep_work_dir = false;
  bool sandbox = true;
  // Total bytes the candidate may keep in its scratch folder (orchestrate/scratch_quota.hpp);
  // KBV_SCRATCH_QUOTA_BYTES overrides it; 0: no quota.
  unsigned long long max_scratch_bytes = 4ULL << 30;
  unsigned long long max_host_memory_bytes = 16ULL << 30;  // candidate heap cap (CPU device)
  std::function<void(const std::string&)> progress;        // one line per stage
  // When set (kbv run: one per device thread), the reference work of the problem is kept
  // there and reused by the next candidate of the same problem with the same key
  // (src/eval/reference_session.hpp); when null, everything is private to this evaluation.
  ReferenceSlot* reference = nullptr;
  // When set (kbv run with several evaluations per device), every exchange with a worker holds
  // this device's gate shared and the timing run holds it exclusively (eval/device_gate.hpp).
  DeviceGate* gate = nullptr;
  // A worker started ahead for this very candidate (start_candidate_worker): kbv run starts
  // each device thread's next candidate's worker while the current one is evaluated. Used when
  // it is still alive and was started for the same file; otherwise one is started here.
  std::shared_ptr<CandidateWorker> prestarted;
};

// A candidate's sandboxed worker and its own folder. The folder sits beside the run folders of
// the reference and holds inputs/ and state/ (links to the reference's files, made by the
// evaluation as they are written), candidate/ (its outputs), scratch/ and its log; the sandbox
// binds only those, so the worker can start before the reference it will be judged against is
// known. Stopping the worker and removing the folder (unless the work is kept) is the
// destructor's.
struct CandidateWorker {
  std::filesystem::path candidate;  // absolute path of the candidate file it was started for
  std::filesystem::path folder;
  std::unique_ptr<orchestrate::WorkerProcess> process;
  bool keep_folder = false;

  CandidateWorker() = default;
  CandidateWorker(const CandidateWorker&) = delete;
  CandidateWorker& operator=(const CandidateWorker&) = delete;
  ~CandidateWorker();
};

// A reference session for `request.problem` started ahead: a new run directory and secret
// seed, the key's request part, and a worker that imports torch, loads the problem and draws
// every hidden case on the session's `preparing` thread (under `request.gate`). kbv run keeps it
// in the slot's `ahead` until an evaluation of that problem takes it.
std::unique_ptr<ReferenceSession> start_reference_session(const EvalRequest& request);

// Starts `request.candidate`'s worker: the process starts and imports torch and kbv's worker
// code, then waits for its first request. Nothing of the candidate runs before load_candidate.
std::shared_ptr<CandidateWorker> start_candidate_worker(const EvalRequest& request);

Result evaluate(const EvalRequest& request);

// The text up to its first newline (a reason or message shortened for a one-line report).
std::string first_line(const std::string& text);

}  // namespace kbv::eval
