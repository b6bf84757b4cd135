// What a rerun of kbv run does with a stored result. The store key is the two files' content
// and EvalSettings::key() (what changes a result); the limits a result ran under are not in it
// (a result that stayed within its limits is the same under larger ones). A rerun evaluates again
// a stored `harness_error` (a fault of kbv, never a verdict on the candidate: it is retried until
// it gets one) and a stored `timeout` that ran under a shorter compile or call timeout than the
// rerun's: raising --timeout or --compile-timeout retries exactly those. Rows written before
// results recorded their limits are kept.
#pragma once

#include <nlohmann/json.hpp>

#include "eval/eval_request.hpp"

namespace kbv::schedule {

bool evaluate_again(const nlohmann::json& stored, const eval::EvalLimits& now);

}  // namespace kbv::schedule
