// A candidate's sandboxed worker and its own folder. The folder sits beside the run folders of
// the reference and holds inputs/ and state/ (links to the reference's files, made by the
// evaluation as they are written), candidate/ (its outputs), scratch/ and its log; the sandbox
// binds only those, so the worker can start before the reference it will be judged against is
// known (kbv run starts each device thread's next candidate's worker ahead).
#pragma once

#include <filesystem>
#include <memory>

#include "eval/eval_request.hpp"
#include "eval/workspace.hpp"
#include "orchestrate/worker_process.hpp"

namespace kbv::eval {

// Stopping the worker and removing the folder (unless the work is kept) is the destructor's.
struct CandidateWorker {
  std::filesystem::path candidate;  // absolute path of the candidate file it was started for
  std::filesystem::path folder;
  FolderOwner owner;  // marks the folder in use (a killed run's is reclaimed)
  std::unique_ptr<orchestrate::WorkerProcess> process;
  bool keep_folder = false;

  CandidateWorker() = default;
  CandidateWorker(const CandidateWorker&) = delete;
  CandidateWorker& operator=(const CandidateWorker&) = delete;
  ~CandidateWorker();
};

// Starts `request.candidate`'s worker: the process starts and imports torch and kbv's worker
// code, then waits for its first request. Nothing of the candidate runs before load_candidate.
// `candidate_sha256` keys its build-cache folder.
std::shared_ptr<CandidateWorker> start_candidate_worker(const EvalRequest& request,
                                                        const std::string& candidate_sha256);

}  // namespace kbv::eval
