// Evaluation of one candidate against one problem, end to end: the reference worker draws the
// families and computes golden outputs, the sandboxed candidate worker runs the candidate, and
// this process compares, times, audits and decides. Neither worker ever sees the other's code.
// The phases are eval/phases.hpp; the pure judges behind them src/judge/.
#pragma once

#include "core/result.hpp"
#include "eval/candidate_worker.hpp"
#include "eval/eval_request.hpp"
#include "eval/reference_work.hpp"

namespace kbv::eval {

Result evaluate(const EvalRequest& request);

}  // namespace kbv::eval
