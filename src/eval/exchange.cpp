#include "eval/exchange.hpp"

#include "core/clock.hpp"
#include "eval/memory_plan.hpp"
#include "orchestrate/call_trace.hpp"

namespace kbv::eval {
using nlohmann::json;
using orchestrate::Response;

WorkerExchange::WorkerExchange(ReferenceSession& session, CandidateWorker& candidate,
                               DeviceGate* gate, const EvalLimits& limits)
    : session_(session), candidate_(candidate), gate_(gate), limits_(limits) {}

// This evaluation's wait for its device (orchestrate::trace_wait), with the stage it was in.
void WorkerExchange::trace_wait(std::string_view what, std::chrono::system_clock::time_point since,
                                double seconds, json detail) const {
  if (seconds < orchestrate::kTracedWaitS) return;
  if (!detail.is_object()) detail = json::object();
  detail["stage"] = stage_;
  const int pid = session_.worker ? static_cast<int>(session_.worker->pid()) : 0;
  orchestrate::trace_wait(pid, what, since, seconds, detail);
}

void WorkerExchange::count_wait(std::string_view what, std::chrono::system_clock::time_point since,
                                std::chrono::steady_clock::time_point started, json detail) {
  const double waited = seconds_since(started);
  gate_wait_[stage_] += waited;
  trace_wait(what, since, waited, std::move(detail));
}

json WorkerExchange::memory_wait_detail(const MemoryLedger& ledger, json fields) {
  if (orchestrate::call_trace_path().empty()) return nullptr;
  fields["capacity"] = ledger.capacity();
  fields["reserved_before"] = ledger.reserved_bytes();
  fields["waiting_before"] = ledger.waiting();
  return fields;
}

DeviceGate::Hold WorkerExchange::enter_gate(bool exclusive) {
  if (!gate_) return {};
  auto t = Clock::now();
  auto since = std::chrono::system_clock::now();
  auto hold = exclusive ? gate_->exclusive() : gate_->shared();
  count_wait("wait_gate", since, t, {{"exclusive", exclusive}});
  return hold;
}

MemoryLedger::Reservation WorkerExchange::reserve_memory(double bytes, double device_bytes) {
  if (!gate_) return {};
  MemoryLedger& ledger = gate_->memory();
  ledger.size_once(device_bytes * kReservableShare);
  json detail = memory_wait_detail(ledger, {{"bytes", bytes}});
  auto t = Clock::now();
  auto since = std::chrono::system_clock::now();
  auto reservation = ledger.reserve(bytes);
  count_wait("wait_memory", since, t, std::move(detail));
  return reservation;
}

bool WorkerExchange::grow_memory(MemoryLedger::Reservation& held, double more) {
  if (!gate_) return false;
  MemoryLedger& ledger = gate_->memory();
  json detail = memory_wait_detail(
      ledger, {{"bytes", held.bytes() + more}, {"held", held.bytes()}, {"grows", true}});
  auto t = Clock::now();
  auto since = std::chrono::system_clock::now();
  if (!ledger.grow(held, more)) return false;  // refused at once: nothing waited here
  count_wait("wait_memory", since, t, std::move(detail));
  return true;
}

Response WorkerExchange::reference(const json& request) {
  auto call = [this](const json& sent) {
    auto hold = enter_gate(false);
    return reference_off_gate(sent);
  };
  // (on_sensitivity_room sets both hooks together.)
  const bool ask =
      make_room_ && !room_made_ && !(gate_ && gate_->held_by_this_thread()) && room_wanted_();
  if (!ask) return call(request);
  json sent = request;
  sent["sensitivity_room"] = false;
  auto response = call(sent);
  if (response.ok() || response.error_kind != "sensitivity_room") return response;
  // Outside the gate: the wait for memory is not a device call.
  room_made_ = true;
  make_room_();
  return call(request);
}

Response WorkerExchange::reference_off_gate(const json& request) {
  auto t = Clock::now();
  auto response = session_.worker->call(request, reference_timeout(limits_));
  reference_s_ += seconds_since(t);
  return response;
}

ReferenceCall WorkerExchange::reference_call() {
  return [this](const json& m) { return reference(m); };
}

Response WorkerExchange::candidate(const json& request, const orchestrate::FdSet& fds) {
  return candidate(request, limits_.call_timeout, fds);
}

Response WorkerExchange::candidate(const json& request, std::chrono::milliseconds timeout,
                                   const orchestrate::FdSet& fds) {
  auto hold = enter_gate(false);
  auto t = Clock::now();
  auto response = candidate_.process->call(request, timeout, fds);
  candidate_s_ += seconds_since(t);
  ++candidate_answers_;
  return response;
}

void WorkerExchange::send_candidate(const json& request) { candidate_.process->send(request); }

Response WorkerExchange::receive_candidate(std::chrono::milliseconds timeout) {
  ++candidate_answers_;
  return candidate_.process->receive(timeout);
}

}  // namespace kbv::eval
