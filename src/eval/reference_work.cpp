#include "eval/reference_work.hpp"

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/hash.hpp"
#include "eval/device_gate.hpp"
#include "eval/workspace.hpp"
#include "judge/harness_fault.hpp"
#include "orchestrate/worker_options.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;
using orchestrate::Response;
using orchestrate::worker_request;
namespace cmd = orchestrate::cmd;

std::chrono::seconds reference_timeout(const EvalLimits& limits) {
  return std::max(limits.call_timeout * 4, std::chrono::seconds(600));
}

void require_reference_answer(const Response& response, const fs::path& problem,
                              const std::string& stage) {
  if (response.ok()) return;
  // The reference dying, hanging, sending junk, failing in kbv's own code or running out of
  // memory or disk is kbv's fault, not the problem's (judge/harness_fault.hpp).
  if (auto fault = judge::classify_reference_failure(response, stage)) {
    throw judge::HarnessFaultError(*fault, response.detail);
  }
  if (response.error_kind == "problem_error" || response.error_kind == "usage_error") {
    throw UsageError(fmt::format("{}: {}", problem.string(), response.message));
  }
  throw UsageError(fmt::format("the reference failed while {}: {}\n{}", stage, response.message,
                               response.detail));
}

fs::path init_inputs_file(const fs::path& run_dir) {
  return run_dir / "inputs" / "init_inputs.safetensors";
}

void load_problem_into(ReferenceSession& session, const EvalRequest& request,
                       const ReferenceCall& call) {
  auto response = call(worker_request(
      cmd::kLoadProblem, {{"problem", fs::absolute(request.problem).string()},
                          {"device", request.settings.device},
                          {"init_inputs_path", init_inputs_file(session.run_dir).string()}}));
  require_reference_answer(response, request.problem, "loading the problem");
  session.loaded = response.result;
  session.key.software = software_of(response.result["environment"]);
}

json default_redraw(const json& loaded, const Protocol& protocol) {
  json names = json::array();
  if (!protocol.redraw_parameters) return names;
  for (const auto& [name, info] : loaded["state_spec"].items()) names.push_back(name);
  return names;
}

namespace {

// One call per draw, then one for the timing inputs: each call holds the device's gate (shared)
// only for its own part, so a timing run of another evaluation waits for one draw, not the
// whole set (at KernelBench's sizes, 15-19 s in one call on the H200; about 1 s a draw).
json draw_cases_of(const ReferenceSession& session, const Protocol& protocol, const json& redraw,
                   const fs::path& problem, const ReferenceCall& call) {
  json prepared = {{"cases", json::array()}, {"notes", json::array()}};
  for (const auto& f : protocol.families) {
    for (int draw = 0; draw < f.draws; ++draw) {
      auto response = call(worker_request(
          cmd::kPrepareFamily, {{"secret", session.secret},
                                {"family", {{"name", f.name}, {"draws", 1}, {"first", draw}}},
                                {"redraw", redraw},
                                {"directory", session.run_dir.string()}}));
      require_reference_answer(response, problem, "drawing the input families");
      for (auto& c : response.result["cases"]) prepared["cases"].push_back(std::move(c));
      for (auto& n : response.result["notes"]) prepared["notes"].push_back(std::move(n));
    }
  }
  auto timing = call(
      worker_request(cmd::kPrepareTimingSets, {{"cases", prepared["cases"]},
                                               {"directory", session.run_dir.string()},
                                               {"timing_families", protocol.timing_families}}));
  require_reference_answer(timing, problem, "preparing the timing inputs");
  prepared["timing_inputs"] = timing.result["timing_inputs"];
  prepared["timing_golden"] = timing.result["timing_golden"];
  return prepared;
}

// A new session: its own run directory and secret seed; no worker yet.
std::unique_ptr<ReferenceSession> new_reference_session(const EvalRequest& request,
                                                        const ReferenceKey& key) {
  auto fresh = std::make_unique<ReferenceSession>();
  fresh->key = key;
  fresh->problem = fs::absolute(request.problem);
  fresh->keep_run_dir = request.placement.keep_work_dir;
  auto dir = make_run_dir(request.placement.work_dir, request.placement.keep_work_dir);
  fresh->run_dir = dir.path;
  fresh->run_dir_owner = std::move(dir.owner);
  fresh->secret = random_secret();
  fresh->key.secret_sha256 = sha256_hex(fresh->secret);
  return fresh;
}

std::unique_ptr<orchestrate::WorkerProcess> start_reference_worker(const EvalRequest& request,
                                                                   const fs::path& run_dir) {
  orchestrate::WorkerSpec spec;
  spec.kind = orchestrate::WorkerKind::Reference;
  spec.size = request.settings.size;
  spec.sandbox = request.settings.sandbox;
  spec.folder = run_dir;
  spec.address_space_bytes = request.limits.reference_address_space_bytes;
  return std::make_unique<orchestrate::WorkerProcess>(orchestrate::worker_options(spec));
}

}  // namespace

void draw_session_cases(ReferenceSession& session, const Protocol& protocol, const json& redraw,
                        const fs::path& problem, const ReferenceCall& call) {
  session.prepared = draw_cases_of(session, protocol, redraw, problem, call);
  session.prepared_redraw = redraw;
  session.audit.reset();
  ++session.preparations;
}

ReferenceKey requested_key(const EvalRequest& request, const Protocol& protocol,
                           const std::string& problem_sha256) {
  ReferenceKey key;
  key.problem_sha256 = problem_sha256;
  key.device = request.settings.device;
  key.protocol = protocol.name;
  key.protocol_version = protocol.version;
  key.draws = request.settings.hidden_draws;
  key.size = request.settings.size;
  key.kbv_version = std::string(kVersion);
  return key;
}

std::unique_ptr<ReferenceSession> start_reference_session(const EvalRequest& request) {
  const Protocol protocol =
      protocol_by_name(request.settings.protocol, request.settings.hidden_draws);
  auto session = new_reference_session(
      request, requested_key(request, protocol, sha256_file(request.problem)));
  session->worker = start_reference_worker(request, session->run_dir);
  // The problem is loaded and its cases drawn on a thread of the session's own, each call under
  // the device's gate like any evaluation's (a timing run on the device excludes them); the
  // evaluation that takes the session joins it first. A failure leaves the session unused: the
  // evaluation starts a new one and reports the failure itself.
  session->preparing = std::thread([s = session.get(), request, protocol] {
    try {
      auto call = [&](const json& message) {
        DeviceGate::Hold hold;
        if (request.placement.gate) hold = request.placement.gate->shared();
        return s->worker->call(message, reference_timeout(request.limits));
      };
      load_problem_into(*s, request, call);
      draw_session_cases(*s, protocol, default_redraw(s->loaded, protocol), request.problem, call);
      s->prepared_ahead = true;
    } catch (const std::exception& error) {
      s->ahead_error = error.what();
    }
  });
  return session;
}

ReferenceLease acquire_reference(const EvalRequest& request, const ReferenceKey& want) {
  ReferenceLease lease;
  const fs::path problem = fs::absolute(request.problem);
  auto* slot = request.placement.reference;
  if (slot && slot->session && slot->session->key.same_request(want) &&
      slot->session->problem == problem && slot->session->worker &&
      slot->session->worker->call(worker_request(cmd::kPing), std::chrono::seconds(30)).ok()) {
    lease.session = slot->session.get();
  } else {
    if (slot) slot->session.reset();  // stops the old reference, frees its directory
    std::unique_ptr<ReferenceSession> fresh;
    // One started ahead for this problem, when its key still holds and its worker has said
    // nothing since its start (alive, waiting for its first request).
    if (slot && slot->ahead.contains(problem)) {
      auto ahead = std::move(slot->ahead[problem]);
      slot->ahead.erase(problem);
      // Its preparation (load and draws) runs on; waiting for it is this result's reference
      // time. One that failed is dropped: a new session repeats the work and reports why.
      auto t = Clock::now();
      if (ahead && ahead->preparing.joinable()) ahead->preparing.join();
      lease.ahead_wait_s = seconds_since(t);
      if (ahead && ahead->ahead_error.empty() && ahead->key.same_request(want) && ahead->worker &&
          !ahead->worker->ready(std::chrono::milliseconds(0))) {
        fresh = std::move(ahead);
        lease.started_ahead = true;
      }
    }
    if (!fresh) fresh = new_reference_session(request, want);
    lease.session = fresh.get();
    if (slot) {
      slot->session = std::move(fresh);
      ++slot->sessions_started;
    } else {
      lease.owned = std::move(fresh);
    }
  }
  ++lease.session->candidates;
  if (!lease.session->worker) {
    lease.session->worker = start_reference_worker(request, lease.session->run_dir);
  }
  lease.reused = lease.session->candidates > 1;  // an earlier candidate used it
  return lease;
}

}  // namespace kbv::eval
