// What one POST /v1/evaluations asks for, validated: the two sources and the per-request options
// of `kbv eval` (protocol, draws, profile, timing samples and rounds, no_timing, allow_library,
// size, timeouts). Server-wide options (device, sandbox, cache and work folders) are not a
// request's to choose. Every refusal names its reason; the HTTP layer answers it with 400.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "eval/eval_request.hpp"

namespace kbv::serve {

// A request the service refuses (400), with the reason in words.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the server allows and what a request gets when it says nothing: the server's own
// EvalSettings (from its command line) and its limits, which are also the most a request may ask
// (a client must not hold a device longer than the operator allowed).
struct RequestPolicy {
  eval::EvalSettings defaults;
  eval::EvalLimits limits;
  size_t max_source_bytes = 4u << 20;  // per source file
};

struct JobSpec {
  std::string problem_source;
  std::string candidate_source;
  // The problem's file name in results (`problem.name`) and the store row's problem; a request
  // may name it (e.g. "level1/3_ReLU"), else "problem".
  std::string problem_name = "problem";
  std::string run = "serve";  // the store row's run (the model or experiment), for kbv report
  eval::EvalSettings settings;
  eval::EvalLimits limits;

  // Everything but the sources (they are persisted apart, by content): the queue's record.
  nlohmann::json options_json() const;
  // The inverse of options_json() over the policy's defaults (a queued job read back).
  static JobSpec from_options(const nlohmann::json& options, const RequestPolicy& policy);
};

// The request body as JSON: `{"problem": "<source>", "candidate": "<source>", ...}`; throws
// BadRequest naming the first thing wrong (not an object, an unknown field, a field of the wrong
// type or out of range, a source that is empty, too large, has a NUL byte, or a problem that does
// not define Model, get_inputs and get_init_inputs).
JobSpec parse_job(const nlohmann::json& body, const RequestPolicy& policy);

// The same for the text of a body: malformed JSON is a BadRequest too.
JobSpec parse_job_text(const std::string& body, const RequestPolicy& policy);

// One request of a batch: its spec, or the reason it was refused (parse_job's).
struct BatchItem {
  std::optional<JobSpec> spec;
  std::string refused;
};

// POST /v1/batches: `{"evaluations": [<request>, ...]}` or a bare list; each element as
// parse_job. A request refused costs only its own place (an RL step's one malformed completion
// must not lose the others' rewards): it comes back with its reason. The batch as a whole is
// refused (BadRequest) when it is not JSON, not a list, empty or over `max_items`.
std::vector<BatchItem> parse_batch_text(const std::string& body, const RequestPolicy& policy,
                                        size_t max_items);

}  // namespace kbv::serve
