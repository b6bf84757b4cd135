// Judging the operator trace of one forward (threats B1, B2): the candidate's worker records the
// aten operators its forward dispatched and the calls into its own extension functions; the
// reference worker records its own forward's operators. The judgement is made here, in C++.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace kbv::judge {

// The class of a "heavy" operator (matmul, conv, softmax, log_softmax, layer_norm), or "" for
// everything else (elementwise ops, views, allocations).
std::string heavy_class(const std::string& op);

struct TraceAssessment {
  nlohmann::json record;    // what goes into result.candidate.trace
  std::vector<Flag> flags;  // library_main_op, kernel_never_called (reject)
};

// `reference` and `candidate`: {"ops": {name: count}, "extension_calls": {name: count},
// "extension_functions": [names]} as the workers' `trace` command returns them.
//
// library_main_op: every heavy operator class of the reference was dispatched to aten inside
// the candidate's forward, and either no extension function was called or the reference is
// nothing but heavy operators (so an extension around an aten call adds nothing of its own).
// kernel_never_called: the candidate built extension functions and called none of them.
TraceAssessment assess_trace(const nlohmann::json& reference, const nlohmann::json& candidate);

// The severity a trace finding carries under a protocol: the published protocols (standard,
// kbv-paper) accept library calls, so there library_main_op and kernel_never_called are
// warnings and those protocols reproduce published verdicts; `verified` rejects them. Under
// `kbv audit` (the reference as its own candidate) they are warnings whatever the protocol.
Severity trace_flag_severity(const Flag& flag, bool verified_protocol, bool audit = false);

}  // namespace kbv::judge
