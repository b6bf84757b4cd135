// The verdict rule: from what the stages observed to one verdict and one sentence. Kept apart
// from the evaluator so the precedence is stated once and tested on its own.
#pragma once

#include <optional>
#include <string>

#include "core/result.hpp"

namespace kbv::judge {

// A stage that ended the evaluation early (the build, construction, a forward, timing).
struct StageFailure {
  Verdict verdict = Verdict::RuntimeError;  // CompileError, RuntimeError or Timeout
  std::string reason;
};

// Precedence: a failed build is compile_error; otherwise any `reject` flag makes it rejected
// (a detected hack outranks the crash or the wrong answer it may also have caused); then a
// stage failure (timeout, runtime_error); then any failed draw is incorrect; else correct.
// Sets result.verdict and result.reason.
void decide_verdict(Result& result, const std::optional<StageFailure>& failure);

}  // namespace kbv::judge
