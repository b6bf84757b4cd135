// The reference side of an evaluation: starting a reference session (run directory, secret seed,
// worker), loading the problem into it, drawing its hidden cases, and taking the session an
// evaluation will use from kbv run's slot (reused, prepared ahead, or new).
#pragma once

#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "eval/eval_request.hpp"
#include "eval/protocol.hpp"
#include "eval/reference_session.hpp"

namespace kbv::eval {

// The reference is trusted code and its calls include starting torch, drawing every family and
// float64 runs: on a loaded machine they may take far longer than one candidate call, and a
// spurious timeout would mark the whole problem broken.
std::chrono::seconds reference_timeout(const EvalLimits& limits);

// A failed reference call ends the evaluation: as a harness fault (judge::HarnessFaultError) when
// the reference worker died, hung, sent junk, failed in kbv's code or ran out of memory or disk;
// else as the problem's fault, a UsageError (nothing is stored, a rerun retries).
void require_reference_answer(const orchestrate::Response& response,
                              const std::filesystem::path& problem, const std::string& stage);

// One exchange with the session's reference worker (the caller holds the device's gate).
using ReferenceCall = std::function<orchestrate::Response(const nlohmann::json&)>;

// `on_host`: the model and its initial state stay in host memory until the session's worker is
// told to place them (kPlaceModel) or an evaluation first uses them: a session started ahead
// takes nothing of the device before the device's memory ledger has reserved it
// (`loaded["placed"]` says where they are).
//
// `off_gate` (with `on_host`): the load itself goes through this call, outside the device's
// gate, and touches nothing of the device; the device's facts (its context made, its memory
// read) come after it through `call`. A load is seconds of host work (import, construction, the
// meta forward), and under the gate a timing run waiting to start waits for it, and everything
// else on the device with it (session 26's H100 audit: 223 s of timing runs' waits).
void load_problem_into(ReferenceSession& session, const EvalRequest& request,
                       const ReferenceCall& call, bool on_host = false,
                       const ReferenceCall* off_gate = nullptr);

// The parameter names re-drawn for the hidden families before any candidate is seen: every
// state tensor of the reference (a candidate whose own parameters do not all match gets a
// preparation of its own).
nlohmann::json default_redraw(const nlohmann::json& loaded, const Protocol& protocol);

// The sizes `load_problem` answered (`sizes`: inputs, state, and the meta forward's figures).
ProblemSizes loaded_sizes(const nlohmann::json& loaded);
// The device's size as the load told it; 0 on the host or for a session not loaded (every rule
// below then says the problem shares nothing).
double loaded_device_bytes(const nlohmann::json& loaded);
// Whether the loaded problem's model waits in host memory (loaded with `on_host`, not placed).
bool loaded_on_host(const nlohmann::json& loaded);
// Whether the loaded problem (its load_problem answer) is too large to share its device with
// the other evaluations there (memory_plan's needs_device_alone); false on the host.
bool loaded_needs_device_alone(const nlohmann::json& loaded, int evaluations_per_device);
// Whether one evaluation of the loaded problem has its device's memory to itself before its first
// draw (memory_plan's needs_whole_ledger); false on the host.
bool loaded_needs_whole_device(const nlohmann::json& loaded);
// What one evaluation of the loaded problem may need of its device before any case is drawn
// (memory_plan's working_bytes_before_drawing); 0 on the host.
double loaded_working_bytes_before_drawing(const nlohmann::json& loaded);

// Bytes of one element of a tensor dtype named as torch names it.
double dtype_bytes(const std::string& dtype);

// The protocol's cases for the parameter names `redraw` (not yet drawn): id, family, draw,
// redraw. Ids of a set other than `default_set` carry its digest.
nlohmann::json case_list(const Protocol& protocol, const nlohmann::json& redraw,
                         const nlohmann::json& default_set);

// Case `c` made resident in the session's reference (drawn, or kept from before); `pin` keeps it
// until unpinned. Its figures are merged into `c` the first time. Returns the answer.
nlohmann::json ensure_case(ReferenceSession& session, nlohmann::json& c,
                           const std::filesystem::path& problem, const ReferenceCall& call,
                           bool pin);

// The session's cases for `redraw`: the list, the first case drawn (its sizes make the memory
// plan, set once per session) and as many more as the plan keeps resident; the rest are drawn
// when used. A new set replaces the list (the reference keeps the other set's cases within its
// budget), and the audit no longer holds. `ahead_bytes`: a session drawn ahead stops drawing
// where its kept cases and the next draw's peak would pass what it reserved (permit_ahead).
void draw_session_cases(ReferenceSession& session, const Protocol& protocol,
                        const nlohmann::json& redraw, const std::filesystem::path& problem,
                        const ReferenceCall& call, int evaluations_per_device,
                        bool sessions_ahead = false,
                        double ahead_bytes = std::numeric_limits<double>::infinity());

// What a reference session started ahead may do beside the evaluations running on its device,
// within the device's ahead share (MemoryLedger `ahead`, kAheadShare of the device), reserved at
// once or not at all (never waiting): draw its cases where the draw's estimated peak
// (loaded_working_bytes_before_drawing) fits; else keep the problem loaded: on the host, where
// it was loaded (`placed: host`), at no cost to the device, or on the device where its model
// fits (twice the state: the model and its initial copy); else neither (the worker goes and the
// evaluation starts it again). Without a device (host memory) or a gate: draw, unaccounted,
// as the evaluations there are.
struct AheadPermit {
  enum class Scope { draw, load, none };
  Scope scope = Scope::draw;
  std::optional<MemoryLedger::Reservation> reservation;    // held until the evaluation takes over
  double bytes = std::numeric_limits<double>::infinity();  // what draws ahead stay within
  std::string note;                                        // problem.reference.ahead
};
AheadPermit permit_ahead(MemoryLedger* ahead, const nlohmann::json& loaded);

// What a reference session for this request must match, apart from the software and the secret
// (those belong to the session itself).
ReferenceKey requested_key(const EvalRequest& request, const Protocol& protocol,
                           const std::string& problem_sha256);

// Whether kbv run and kbv serve keep a spare reference worker per device thread
// (ReferenceSlot::spare): on a GPU, where a worker's start is seconds; KBV_SPARE_REFERENCES=1
// or 0 says so for any device (the CPU tests turn it on).
bool spare_references_wanted(const std::string& device);

// A reference session for `request.problem` started ahead: a new run directory and secret
// seed, the key's request part, and a worker that imports torch, loads the problem and draws
// every hidden case on the session's `preparing` thread (under the placement's gate). kbv run
// keeps it in the slot's `ahead` until an evaluation of that problem takes it.
//
// `load_only`: the problem is loaded (on the host where the placement has a gate) and nothing
// more: a device thread awaiting the load to place a task (await_needs_whole_device) starts
// one for the task it is about to evaluate, which then places and draws under its own
// reservation.
std::unique_ptr<ReferenceSession> start_reference_session(const EvalRequest& request,
                                                          bool load_only = false);

// A device thread about to evaluate `this_problem` with `next_problem` after it (kbv run's and
// kbv serve's): of the sessions started ahead in `slot`, those two problems' stay and the others
// stop. True where `next_problem`'s is yet to be started: another problem, none kept for it.
bool keep_sessions_ahead(ReferenceSlot& slot, const std::filesystem::path& this_problem,
                         const std::optional<std::filesystem::path>& next_problem);

// Blocks until a session started ahead has loaded its problem (or failed to): whether one
// evaluation of it needs the device's memory to itself (ReferenceSession::needs_whole_device;
// false where the load failed, and the evaluation then reports why). The wait is traced
// (`wait_load`) under the session's worker.
bool await_needs_whole_device(ReferenceSession& session);

// The session an evaluation uses, and how it came by it.
struct ReferenceLease {
  ReferenceSession* session = nullptr;      // the slot's, or `owned`
  std::unique_ptr<ReferenceSession> owned;  // when the request has no slot
  bool reused = false;                      // an earlier candidate used the session
  bool started_ahead = false;               // kbv run started (and prepared) it ahead
  double ahead_wait_s = 0;                  // waiting for that preparation to finish
  std::string ahead_dropped;  // why the session prepared ahead was not used, where it was not
};

// The slot's session when its key still holds (same problem content and path, device, protocol,
// draws, size, kbv) and its worker answers, else one prepared ahead for this problem when its
// key holds and its worker is alive and silent, else a new one (run directory, secret, worker).
ReferenceLease acquire_reference(const EvalRequest& request, const ReferenceKey& want);

}  // namespace kbv::eval
