// What one evaluation is asked to do, in three parts kept apart on purpose:
//  - EvalSettings: everything besides the two files' content that changes a result. kbv run's
//    store key is exactly settings.key(), so a setting added here is in the key by construction.
//  - EvalLimits: the bounds the candidate runs under (timeouts, scratch quota, heap cap). They
//    are not in the key: a result that stayed within them is the same under larger ones. A stored
//    `timeout` result is evaluated again when a rerun raises the timeout it hit
//    (schedule/resume.hpp), and every result records the limits it ran under.
//  - EvalPlacement: where and alongside what it runs (folders, progress, kbv run's reference
//    slot, device gate and the worker started ahead). Never changes a result.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kbv::eval {

struct ReferenceSlot;
class DeviceGate;
struct CandidateWorker;

// A fault of the user's input that is not the candidate's (a malformed problem, no GPU for
// --device cuda): kbv exits non-zero with this message instead of a verdict.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct EvalSettings {
  std::string device = "cpu";         // cpu, cuda, cuda:N
  std::string protocol = "verified";  // verified, kbv-paper, standard
  std::string size = "small";         // KBV_SIZE for the problem files of the bundled suite
  int hidden_draws = 3;
  std::string timing_profile = "standard";  // quick, standard, precise (stats/sampling.hpp)
  int timing_samples = 0;  // per variant; > 0 fixes the count (no adaptive stopping)
  int timing_rounds = 0;   // interleaved rounds; > 0 fixes the count
  bool measure = true;     // time and measure memory (correct candidates only)
  bool sandbox = true;     // an unsandboxed result is not comparable to a sandboxed one
  // kbv audit: the candidate is the problem's own reference, so the checks that PyTorch must not
  // do the main work (library_main_op, kernel_never_called, no_custom_kernel) are warnings.
  bool audit = false;
  // --allow-library: PyTorch rewrites are accepted (contests that allow them): the flags that say
  // PyTorch or a library did the work (no_custom_kernel, library_main_op, kernel_never_called)
  // are warnings under `verified` too, as they are under the published protocols.
  bool allow_library = false;

  bool cuda() const { return device.starts_with("cuda"); }
  // The store key's settings part: the device by kind (cuda:0 and cuda:1 give the same result),
  // and kbv's version.
  nlohmann::json key() const;
};

struct EvalLimits {
  std::chrono::seconds compile_timeout{900};
  std::chrono::seconds call_timeout{120};
  // Total bytes the candidate may keep in its scratch folder (orchestrate/scratch_quota.hpp);
  // KBV_SCRATCH_QUOTA_BYTES overrides it; 0: no quota.
  unsigned long long max_scratch_bytes = 4ULL << 30;
  unsigned long long max_host_memory_bytes = 16ULL << 30;  // candidate heap cap (CPU device)
  // RLIMIT_AS of the reference worker (0: none; KBV_REFERENCE_ADDRESS_SPACE_BYTES): a test and
  // operations knob. Running out of it is a harness fault (out_of_memory), never the candidate's.
  unsigned long long reference_address_space_bytes = 0;

  nlohmann::json to_json() const;  // recorded in every result as `limits`
};

struct EvalPlacement {
  std::filesystem::path cache_dir;  // build cache of candidate extensions, keyed by content
  std::filesystem::path work_dir;   // where run directories are made (default: temp dir)
  bool keep_work_dir = false;
  std::function<void(const std::string&)> progress;  // one line per stage
  // When set (kbv run: one per device thread), the reference work of the problem is kept there
  // and reused by the next candidate of the same problem with the same key
  // (eval/reference_session.hpp); when null, everything is private to this evaluation.
  ReferenceSlot* reference = nullptr;
  // When set (kbv run), every exchange with a worker holds this device's gate shared and the
  // timing run holds it exclusively (eval/device_gate.hpp).
  DeviceGate* gate = nullptr;
  // How many evaluations share the device (kbv run's --workers-per-device): the memory plan
  // gives each reference session its share, and an evaluation too large for its share takes
  // the device alone (eval/memory_plan.hpp).
  int evaluations_per_device = 1;
  // Reference sessions are started ahead on the device beside the evaluations (kbv run, not
  // while a retry has the device alone): their share of the device's memory for cases
  // (kAheadShare) is then not the sessions' (eval/memory_plan.hpp).
  bool sessions_ahead = false;
  // Keep a started reference worker in the slot (`reference`) for the next session that needs
  // one (kbv run, kbv serve; on a GPU by default: spare_references_wanted).
  bool spare_reference = false;
  // A worker started ahead for this very candidate (start_candidate_worker): kbv run starts
  // each device thread's next candidate's worker while the current one is evaluated. Used when
  // it is still alive and was started for the same file; otherwise one is started here.
  std::shared_ptr<CandidateWorker> prestarted;
};

struct EvalRequest {
  std::filesystem::path problem;
  std::filesystem::path candidate;
  EvalSettings settings;
  EvalLimits limits;
  EvalPlacement placement;
};

}  // namespace kbv::eval
