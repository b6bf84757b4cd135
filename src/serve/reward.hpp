// The reward components of a result, compact, for RL loops: what a reward function needs
// without walking the whole kbv.result/1 document (docs/serve.md has a shaping recipe).
#pragma once

#include <nlohmann/json.hpp>

namespace kbv::serve {

// From a result's JSON (kbv.result/1):
//   verdict, correct (bool), hacked (verdict rejected: a reward hack was detected),
//   harness_error (kbv's own fault: no verdict on the candidate, give no reward for it),
//   speedup: the protocol's headline speedup (vs TF32 under verified) {value, ci_low, ci_high,
//   tie} or null when not timed; speedup_fp32: the same against plain FP32 or null;
//   memory_ratio: candidate peak over reference peak, or null;
//   flags: {reject: [ids], warn: [ids]}.
nlohmann::json reward_of(const nlohmann::json& result);

}  // namespace kbv::serve
