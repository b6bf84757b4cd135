#include "eval/exchange.hpp"

#include "core/clock.hpp"
#include "eval/workspace.hpp"

namespace kbv::eval {
using nlohmann::json;
using orchestrate::Response;

WorkerExchange::WorkerExchange(ReferenceSession& session, CandidateWorker& candidate,
                               DeviceGate* gate, const EvalLimits& limits)
    : session_(session), candidate_(candidate), gate_(gate), limits_(limits) {}

DeviceGate::Hold WorkerExchange::enter_gate(bool exclusive) {
  if (!gate_) return {};
  auto t = Clock::now();
  auto hold = exclusive ? gate_->exclusive() : gate_->shared();
  gate_wait_[stage_] += seconds_since(t);
  return hold;
}

Response WorkerExchange::reference(const json& request) {
  auto hold = enter_gate(false);
  auto t = Clock::now();
  auto response = session_.worker->call(request, reference_timeout(limits_));
  reference_s_ += seconds_since(t);
  return response;
}

ReferenceCall WorkerExchange::reference_call() {
  return [this](const json& m) { return reference(m); };
}

Response WorkerExchange::candidate(const json& request) {
  return candidate(request, limits_.call_timeout);
}

Response WorkerExchange::candidate(const json& request, std::chrono::milliseconds timeout) {
  auto hold = enter_gate(false);
  auto t = Clock::now();
  auto response = candidate_.process->call(in_candidate_view(request), timeout);
  candidate_s_ += seconds_since(t);
  ++candidate_answers_;
  return response;
}

void WorkerExchange::send_candidate(const json& request) {
  candidate_.process->send(in_candidate_view(request));
}

Response WorkerExchange::receive_candidate(std::chrono::milliseconds timeout) {
  ++candidate_answers_;
  return candidate_.process->receive(timeout);
}

// The candidate reads the reference's inputs and states through its own folder: mirrored when
// the reference has written new ones (a first or new preparation) since the last time, and the
// request's paths into the run folder rewritten to the candidate's view.
json WorkerExchange::in_candidate_view(const json& request) {
  if (mirrored_preparations_ != session_.preparations) {
    for (const char* sub : {"inputs", "state"}) {
      mirror_files(session_.run_dir / sub, candidate_.folder / sub);
    }
    mirrored_preparations_ = session_.preparations;
  }
  return rebase_paths(request, session_.run_dir.string(), candidate_.folder.string());
}

}  // namespace kbv::eval
