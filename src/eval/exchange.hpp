// The evaluation's two workers behind one door: every exchange holds the device's gate (shared;
// the timing run holds it exclusively) and is timed into the evaluation's split (reference,
// candidate, gate wait by stage). Descriptors the reference answers with (shared blocks) are
// handed on to the candidate with its request (docs/case-path.md).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "eval/candidate_worker.hpp"
#include "eval/device_gate.hpp"
#include "eval/reference_session.hpp"
#include "eval/reference_work.hpp"

namespace kbv::eval {

class WorkerExchange {
 public:
  WorkerExchange(ReferenceSession& session, CandidateWorker& candidate, DeviceGate* gate,
                 const EvalLimits& limits);

  // The stage (a durations_s name) that gate waits are counted under from now on.
  void set_stage(std::string stage) { stage_ = std::move(stage); }
  const std::string& stage() const { return stage_; }

  // One exchange with the reference worker, under its (long) timeout. Where room for the
  // sensitivity's float64 runs is made on demand (on_sensitivity_room), the request says
  // whether it is there; a reference that needs it answers `sensitivity_room`, and the request
  // is sent again once the evaluation has made room (never while this thread holds the device
  // exclusively: others wait for the gate holding the memory it would wait for).
  orchestrate::Response reference(const nlohmann::json& request);
  // `wanted`: whether the evaluation's reservation leaves the runs out (asked before each
  // request); `make`: grow it (may wait for other evaluations). Once made, for the rest of the
  // evaluation.
  void on_sensitivity_room(std::function<bool()> wanted, std::function<void()> make) {
    room_wanted_ = std::move(wanted);
    make_room_ = std::move(make);
  }
  ReferenceCall reference_call();
  // An exchange with the reference that touches nothing of the device (the static scan of the
  // candidate's source): outside the gate, so a timing run waiting to start does not wait for
  // it, nor does everything else on the device behind that timing run (session 26: a scan of
  // 37 s held one back).
  orchestrate::Response reference_off_gate(const nlohmann::json& request);
  // One exchange with the candidate's worker (call_timeout unless given), with the descriptors
  // it is to use.
  orchestrate::Response candidate(const nlohmann::json& request,
                                  const orchestrate::FdSet& fds = {});
  orchestrate::Response candidate(const nlohmann::json& request, std::chrono::milliseconds timeout,
                                  const orchestrate::FdSet& fds = {});
  // The load, split so the reference draws while the candidate builds; not gated (the build
  // is CPU work and may take minutes). receive_candidate's wait is counted by the caller as
  // compile time.
  void send_candidate(const nlohmann::json& request);
  orchestrate::Response receive_candidate(std::chrono::milliseconds timeout);

  // The device to this evaluation alone (the timing run, or an evaluation too large to share
  // it); the wait counts as gate wait. Held already by this thread: a no-op hold.
  DeviceGate::Hold exclusive() { return enter_gate(true); }
  // Device memory for this evaluation (eval/memory_ledger.hpp), the ledger sized first from the
  // device's size; the wait counts as gate wait. None without a gate (nothing shares the device).
  MemoryLedger::Reservation reserve_memory(double bytes, double device_bytes);
  // `held` grown by `more`, waiting beside it (MemoryLedger::grow); false at once where waiting
  // could wait forever. A wait is traced as wait_memory with `grows`.
  bool grow_memory(MemoryLedger::Reservation& held, double more);

  std::chrono::seconds call_timeout() const { return limits_.call_timeout; }
  const std::filesystem::path& run_dir() const { return session_.run_dir; }
  const std::filesystem::path& candidate_dir() const { return candidate_.folder; }

  // Answers received from the candidate's worker so far (harness faults: eval/harness_faults).
  int candidate_answers() const { return candidate_answers_; }
  double reference_seconds() const { return reference_s_; }
  double candidate_seconds() const { return candidate_s_; }
  const std::map<std::string, double>& gate_wait_by_stage() const { return gate_wait_; }

 private:
  DeviceGate::Hold enter_gate(bool exclusive);
  void trace_wait(std::string_view what, std::chrono::system_clock::time_point since,
                  double seconds, nlohmann::json detail) const;
  // A wait for the device that began at `since` (`started` on the steady clock) and ends now:
  // counted as gate wait of the stage, and traced.
  void count_wait(std::string_view what, std::chrono::system_clock::time_point since,
                  std::chrono::steady_clock::time_point started, nlohmann::json detail);
  // What the memory ledger held when a wait for it began, beside `fields` (traced runs only).
  static nlohmann::json memory_wait_detail(const MemoryLedger& ledger, nlohmann::json fields);

  ReferenceSession& session_;
  CandidateWorker& candidate_;
  DeviceGate* gate_;
  const EvalLimits& limits_;
  std::string stage_ = "start";
  double reference_s_ = 0, candidate_s_ = 0;
  std::map<std::string, double> gate_wait_;
  int candidate_answers_ = 0;
  std::function<bool()> room_wanted_;
  std::function<void()> make_room_;
  bool room_made_ = false;
};

}  // namespace kbv::eval
