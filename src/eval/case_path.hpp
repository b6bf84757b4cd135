// The hidden cases as one evaluation uses them (docs/case-path.md): made resident in the
// reference's worker (drawn, or kept from an earlier candidate), shared with the candidate's
// worker as descriptors of shared blocks, and judged in the reference's worker, where the
// golden outputs stay. Only figures come back; this class turns them into judgements with the
// pure judges (judge/case_judge.hpp). Everything that moves a case's tensors is here.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/exchange.hpp"
#include "eval/protocol.hpp"
#include "eval/reference_session.hpp"
#include "judge/case_judge.hpp"
#include "judge/findings.hpp"

namespace kbv::eval {

// How the candidate's forward gets its inputs.
struct RunInputs {
  bool fresh = false;  // a new copy of the case's values (new addresses)
  bool keep = false;   // the candidate keeps these tensor objects for a later re-check
  // Free allocator memory poisoned (NaN, CUDA) before the call, as before every checked call;
  // false for the one re-check that must look like a timed call to a forward watching for it.
  bool poison = true;
  std::string reuse;  // the kept objects of the block with this token (its values written anew)
};

// One forward of the candidate on a case, as it answered.
struct CaseRun {
  orchestrate::Response answer;
  std::string token;  // the shared block of inputs it ran on (its mutation is checked)
};

// A case (or timing set) judged: the outputs, and the inputs the forward changed in place.
struct CaseJudgement {
  judge::OutputsJudgement outputs;
  nlohmann::json inputs_mutated = nlohmann::json::array();
  nlohmann::json slot_checksums = nlohmann::json::array();  // what was judged, keyed
};

class CasePath {
 public:
  CasePath(WorkerExchange& workers, ReferenceSession& session, const Protocol& protocol,
           const std::filesystem::path& problem);

  // Case `c` of the session resident in the reference; `pin` keeps it until unpin(). `c` gets
  // its figures the first time it is drawn.
  void ensure(nlohmann::json& c, bool pin = false);
  // The session's perturbed twin of case `c` (the same draw with one input element changed at a
  // secret place; python/kbv/reference.py), made once per session and drawn by ensure().
  nlohmann::json& perturbed(const nlohmann::json& c);
  void unpin(const std::vector<std::string>& ids);
  // How many cases the memory plan keeps resident (0 before the first draw).
  int kept_cases() const { return session_.plan ? session_.plan->cached_cases : 0; }

  // The block the candidate copies its outputs into, shaped like case `c`'s reference outputs
  // (once per candidate). A failed answer is the candidate's (its worker could not open it).
  orchestrate::Response attach_slot(const nlohmann::json& c);

  // The candidate's forward on case `c` (resident): its inputs as `how` says, its state.
  CaseRun run(const nlohmann::json& c, const RunInputs& how);
  // The operator or kernel trace (`part`) of the candidate's forward on case `c`.
  orchestrate::Response trace(const nlohmann::json& c, const char* part);

  // The slot judged against case `c`'s golden outputs (`timing`: timing set i's), after the
  // forward that answered `run`; `token`: the inputs it ran on. Structure failures need no
  // measurement: the plan says so, and only the inputs are checked.
  CaseJudgement judge(const nlohmann::json& c, const nlohmann::json& run, const std::string& token,
                      std::optional<int> timing = std::nullopt);

  // The keyed checksums of what was judged on case `id`'s plain run (the determinism re-check
  // compares its repeat with them).
  void remember(const std::string& id, const nlohmann::json& checksums) { judged_[id] = checksums; }
  nlohmann::json remembered(const std::string& id) const {
    auto it = judged_.find(id);
    return it == judged_.end() ? nlohmann::json::array() : it->second;
  }

  // Case `c`'s input values written into the block `token` shared before (same addresses).
  void write_into(const nlohmann::json& c, const std::string& token);
  void release(const std::vector<std::string>& tokens);

  // The timing sets: the inputs of the first `count` cases of the protocol's timing families
  // (pinned), their golden outputs under the initial state, and the candidate's view of them.
  // Answers the reference's `golden` (one case-like entry per set) or a failed response of the
  // candidate.
  std::optional<orchestrate::Response> prepare_timing(int count, nlohmann::json& golden);
  // Timing sets whose inputs the candidate changed while they were timed on.
  nlohmann::json changed_timing_inputs();
  void end_timing();

 private:
  nlohmann::json& session_case(const std::string& id);
  void require(const orchestrate::Response& response, const std::string& stage) const;

  WorkerExchange& workers_;
  ReferenceSession& session_;
  const Protocol& protocol_;
  const std::filesystem::path& problem_;
  std::vector<std::string> timing_pins_;
  std::map<std::string, nlohmann::json> judged_;
};

}  // namespace kbv::eval
