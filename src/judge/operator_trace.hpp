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
  std::vector<Flag> flags;  // library_main_op, kernel_never_called, no_custom_kernel (reject)
  // Calls into the candidate's own code in the traced forward: extension functions, operators
  // of its own namespace (TORCH_LIBRARY), Triton kernel launches.
  int own_calls = 0;
};

// `reference` and `candidate`: {"ops": {name: count}, "extension_calls": {name: count},
// "extension_functions": [names], "jit_launches": n} as the workers' `trace` command returns
// them.
//
// library_main_op: every heavy operator class of the reference was dispatched to aten inside
// the candidate's forward, and either none of the candidate's own code was called or the
// reference is nothing but heavy operators (so an extension around an aten call adds nothing of
// its own).
// kernel_never_called: the candidate built extension functions and called none of them.
// no_custom_kernel: the forward called none of the candidate's own code (no extension function,
// no operator of its own namespace, no Triton launch): PyTorch did all of it. On CUDA the GPU
// kernel trace decides this one when it saw kernels (src/judge/kernel_trace.hpp): a kernel
// launched outside the dispatcher and outside Triton's Python launcher is invisible here.
TraceAssessment assess_trace(const nlohmann::json& reference, const nlohmann::json& candidate);

// How the flags that say PyTorch or a library did the candidate's work (library_main_op,
// kernel_never_called, no_custom_kernel) count. They reject under the `verified` protocol only:
// the published protocols (standard, kbv-paper) accept library calls, so there they are
// warnings and those protocols reproduce published verdicts; `--allow-library` makes them
// warnings under `verified` too (contests that accept PyTorch rewrites); under `kbv audit` (the
// reference as its own candidate) they are warnings whatever the protocol.
struct LibraryPolicy {
  bool verified_protocol = true;
  bool allow_library = false;
  bool audit = false;
  bool rejects() const { return verified_protocol && !allow_library && !audit; }
};

bool is_library_flag(const std::string& id);

// The severity a trace finding carries under `policy` (other flags keep their own).
Severity trace_flag_severity(const Flag& flag, const LibraryPolicy& policy);

}  // namespace kbv::judge
