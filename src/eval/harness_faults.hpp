// The evaluation's side of harness faults (the rules are judge/harness_fault.hpp): the facts
// about disks, taken by this process (never reported by a worker) when something failed, and the
// outcome of a fault caught inside an evaluation: kbv's own (harness_error), or the candidate's
// when the disk that filled up is full of the candidate's own files.
#pragma once

#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "eval/eval_request.hpp"
#include "judge/harness_fault.hpp"

namespace kbv::eval {

struct DiskPlaces {
  std::filesystem::path run_dir;           // the reference's run directory (golden/ inside)
  std::filesystem::path candidate_folder;  // kbv-cand-*: candidate/ (outputs) and scratch/
  std::filesystem::path cache_folder;      // the candidate's build-cache folder
  unsigned long long need_bytes = 0;       // the most kbv may write at once (output bound)
};

// For each file system kbv writes to in the evaluation (the work root's; the build cache's when
// it is another): its free and total bytes and how much of it the candidate's own files hold.
// Folders that do not exist (yet) are skipped; never throws.
std::vector<judge::DiskFacts> observe_disks(const DiskPlaces& places);

// A stage of the candidate's that failed, when the facts make it a harness fault (a full disk
// kbv writes to, not filled by the candidate): judge::classify_candidate_failure on the disks
// as they are now. Walks folders only when the answer names a full disk.
std::optional<HarnessFault> candidate_disk_fault(const judge::FailedStage& stage,
                                                 const DiskPlaces& places);

// What the evaluation knew of the candidate when an exception ended it.
struct CandidateState {
  bool answered = false;  // its worker has answered (its answers are read as JSON)
  bool ran = false;       // its code may have run (load_candidate was sent)
  nlohmann::json isolation = nlohmann::json::object();  // its sandbox's report
};

// What an exception caught inside an evaluation means for its result.
struct FaultOutcome {
  std::optional<HarnessFault> fault;  // harness_error
  // Or the candidate's runtime_error: a disk_full fault on a disk the candidate itself filled.
  std::optional<judge::StageFailure> candidate_failure;
  std::string error_detail;  // the evidence behind either (a worker's log tail, errno text)
};
// The candidate's runtime_error instead of a harness fault when it may be its doing: an answer kbv
// could not read once its worker answered (judge::is_malformed_answer), a disk it filled
// (judge::disk_filled_by_candidate), a reference it could reach
// (judge::candidate_could_reach_reference).
FaultOutcome fault_outcome(const std::exception& error, const std::string& stage,
                           const DiskPlaces& places, const CandidateState& candidate);

// The harness_error result of an evaluation that failed outside the evaluator (the gate, the
// ledger, storing its result): what kbv run and kbv serve store and report for it.
Result harness_error_result(const EvalRequest& request, HarnessFault fault,
                            const std::string& problem_name);

// What an evaluation was doing in one of its stages (the durations_s names), in words.
std::string stage_in_words(const std::string& stage);

}  // namespace kbv::eval
