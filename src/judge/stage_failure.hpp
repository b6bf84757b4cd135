// A candidate worker's failed answer turned into the stage failure that ends the evaluation:
// which verdict (compile_error, runtime_error, timeout) and the one-line reason. Pure.
#pragma once

#include <chrono>
#include <string>

#include "judge/verdict.hpp"
#include "orchestrate/worker_process.hpp"

namespace kbv::judge {

struct FailedStage {
  StageFailure failure;
  std::string detail;  // the traceback or compiler output behind the reason (error_detail)
  // What the harness-fault rules (judge/harness_fault.hpp) need of the answer: the stage, how
  // the worker answered, and whether the answer names a full disk (the candidate's own text).
  std::string stage;
  orchestrate::Response::Status status = orchestrate::Response::Status::Died;
  std::string error_kind;
  bool names_disk_full = false;
};

// Building, importing and constructing the candidate failed.
FailedStage load_failure(const orchestrate::Response& answer, std::chrono::seconds compile_timeout);
// A later call failed `during` a named stage ("the forward on h1_native inputs").
FailedStage call_failure(const orchestrate::Response& answer, const std::string& during);

// Whether a failed call reads as an access to unmapped memory: an illegal address on the device,
// or the worker killed by SIGSEGV or SIGBUS on the host. A case's inputs are unmapped in the
// candidate's process once its call is done, their addresses kept reserved (docs/case-path.md,
// revocation), so at a re-check at new addresses after the same values passed at their own,
// this is a forward reading an earlier call's inputs: an address it kept. (The error text is the
// candidate's own; written to look like this, it only rejects its writer.)
bool reads_unmapped_memory(const orchestrate::Response& answer);

// The text up to its first newline (a reason or message shortened for a one-line report).
std::string first_line(const std::string& text);

}  // namespace kbv::judge
