// Harness faults: failures of kbv itself (a full disk, a reference worker that crashed or hung,
// kbv's own memory, a channel that carried junk, kbv's own bug) that end an evaluation as
// `harness_error`, never as the candidate's verdict. This is the one place that decides, and it
// decides from facts kbv itself observes: the errno of kbv's own calls, the role of the worker
// that failed, what the trusted reference worker reports, the free space of the file systems kbv
// writes to and how much of them the candidate's own files hold. Text the candidate controls
// (its messages, its error kinds: its process can write anything on its own channel) may only
// keep a failure the candidate's, never make it kbv's: otherwise a hostile candidate could
// answer every check with "No space left on device" and never be judged. Pure; the facts about
// disks are gathered by eval/disk_facts.
#pragma once

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "judge/stage_failure.hpp"
#include "orchestrate/worker_process.hpp"

namespace kbv::judge {

// Thrown inside an evaluation once a harness fault is known; the evaluator catches it (and every
// other exception, classified by classify_exception) and returns the harness_error result.
class HarnessFaultError : public std::runtime_error {
 public:
  HarnessFaultError(HarnessFault fault, std::string error_detail = "");
  const HarnessFault& fault() const { return fault_; }
  // The longer evidence (a worker's log tail, a traceback): the result's error_detail.
  const std::string& error_detail() const { return error_detail_; }

 private:
  HarnessFault fault_;
  std::string error_detail_;
};

// The reference worker's failed answer. The reference is trusted (the problem is trusted code,
// and no candidate reaches its process, its files or its channel), so what it reports is taken
// as said. A harness fault when it died, hung (timed out), sent junk on its channel, answered
// `internal_error` (kbv's worker code failed), or ran out of memory or disk (`resource`).
// nullopt when the problem itself is at fault (`problem_error`, `usage_error`, or the problem's
// code raising): the caller reports the problem broken (eval::UsageError), as before.
std::optional<HarnessFault> classify_reference_failure(const orchestrate::Response& answer,
                                                       const std::string& stage);

// The kind an errno of kbv's own calls means: ENOSPC and EDQUOT a full disk, ENOMEM memory.
std::optional<FaultKind> fault_of_errno(int code);

// An exception caught inside kbv during an evaluation (never the candidate's: the candidate's
// doings arrive as answers, not exceptions). HarnessFaultError keeps its fault; std::bad_alloc is
// out_of_memory; a std::system_error (std::filesystem::filesystem_error among them) is classified
// by its errno; anything else is kbv's own bug, `internal`.
HarnessFault classify_exception(const std::exception& error, const std::string& stage);

// The exception came from reading a worker's answer that lacks what kbv expects (a
// nlohmann::json error: a missing field, a wrong type; or std::out_of_range, invalid_argument,
// length_error of the numbers and indices in it). Once the candidate's worker has answered,
// such an answer may be the candidate's (its process writes its own channel), so the evaluation
// calls it the candidate's runtime_error rather than kbv's bug: in doubt, the candidate's.
bool is_malformed_answer(const std::exception& error);

// The candidate's runtime_error for an answer kbv could not read.
std::string malformed_answer_reason(const std::exception& error);

// A reference that died, hung or sent junk (reference_crashed, channel) while the candidate's
// code ran without a PID namespace of its own (no sandbox, or a machine that refuses namespaces):
// the candidate could see the reference's process, kill it, stop it or write on its channel
// (/proc/<pid>/fd), so the fault may be its doing, and in doubt it is its runtime_error.
bool candidate_could_reach_reference(const HarnessFault& fault, bool candidate_ran,
                                     const nlohmann::json& candidate_isolation);
std::string reached_reference_reason(const HarnessFault& fault);

// What kbv sees of one file system it writes to in an evaluation (the work root, which holds the
// run directory and the candidate's folder; the candidate's build cache), taken when something
// failed.
struct DiskFacts {
  std::string path;  // a folder kbv writes to there
  unsigned long long free_bytes = 0, total_bytes = 0;
  // The most kbv may have to write there at once beyond the classifier's minimum (kMinimumRoom):
  // an extension's build; nothing of a case is written to disk (docs/case-path.md).
  unsigned long long need_bytes = 0;
  // The candidate's own files on this file system: its scratch folder (when on disk, without the
  // sandbox's tmpfs); and its build-cache folder.
  unsigned long long candidate_bytes = 0;
  unsigned long long candidate_cache_bytes = 0;
  // An allowance for the candidate's files beyond its scratch (0: none since the case path).
  unsigned long long golden_bytes = 0;
};

inline constexpr unsigned long long kMinimumRoom = 256ULL << 20;
// Beyond its golden-sized outputs, what an honest candidate's outputs and scratch may hold on
// disk, and what an extension build may leave in its cache folder.
inline constexpr unsigned long long kOutputsSlack = 16ULL << 20;
inline constexpr unsigned long long kBuildCacheAllowance = 1ULL << 30;

// The file system has less room than kbv may need there.
bool lacks_room(const DiskFacts& disk);
// It lacks room and the candidate's own files hold more of it than honest work writes: the
// candidate filled it (a hostile disk filler must not pass for a full disk).
bool filled_by_candidate(const DiskFacts& disk);

// The answer names a full disk or quota (its `resource`, or ENOSPC/EDQUOT in its words). From the
// candidate's worker this is the candidate's text: a necessary sign, never sufficient.
bool names_disk_full(const orchestrate::Response& answer);

// A stage of the candidate's that failed (load_failure, call_failure): a harness fault only when
// (1) the worker answered an error (a crash, a hang, or its scratch quota stay the candidate's),
// (2) the answer names a full disk, (3) a file system kbv writes through for the candidate
// (outputs, build cache) lacks room, and (4) the candidate's own files there are within what
// honest work writes. Else nullopt: the candidate's verdict stands. In doubt, the candidate's:
// with the sandbox it cannot fill a disk but through its own folders, which (4) counts.
std::optional<HarnessFault> classify_candidate_failure(const FailedStage& stage,
                                                       const std::vector<DiskFacts>& disks);

// A disk_full fault seen by kbv itself (its errno, the reference's report) is still the
// candidate's doing when a disk it filled lacks room: that disk, else nullopt.
std::optional<DiskFacts> disk_filled_by_candidate(const std::vector<DiskFacts>& disks);

// The candidate's runtime_error for a disk it filled, in one sentence.
std::string filled_disk_reason(const DiskFacts& disk);

}  // namespace kbv::judge
