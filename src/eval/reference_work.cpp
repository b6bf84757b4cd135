#include "eval/reference_work.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "core/clock.hpp"
#include "core/hash.hpp"
#include "eval/device_gate.hpp"
#include "eval/workspace.hpp"
#include "judge/harness_fault.hpp"
#include "orchestrate/call_trace.hpp"
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

void load_problem_into(ReferenceSession& session, const EvalRequest& request,
                       const ReferenceCall& call, bool on_host, const ReferenceCall* off_gate) {
  const Protocol protocol =
      protocol_by_name(request.settings.protocol, request.settings.hidden_draws);
  json args = {{"problem", fs::absolute(request.problem).string()},
               {"device", request.settings.device},
               {"keep", protocol.judged_by()},
               {"policy", protocol.policy.to_json()}};
  if (on_host) args["place"] = "host";
  const bool apart = on_host && off_gate != nullptr;
  if (apart) args["device_facts"] = false;
  auto response = (apart ? *off_gate : call)(worker_request(cmd::kLoadProblem, args));
  require_reference_answer(response, request.problem, "loading the problem");
  session.loaded = response.result;
  if (apart) {
    auto facts = call(worker_request(cmd::kDeviceFacts));
    require_reference_answer(facts, request.problem, "reading the device after the load");
    for (const char* key : {"environment", "memory"}) session.loaded[key] = facts.result[key];
  }
  session.key.software = software_of(session.loaded["environment"]);
}

json default_redraw(const json& loaded, const Protocol& protocol) {
  json names = json::array();
  if (!protocol.redraw_parameters) return names;
  for (const auto& [name, info] : loaded["state_spec"].items()) names.push_back(name);
  return names;
}

namespace {

// The case ids of one redraw set: the default set's are `<family>-<draw>`; another set's carry
// a digest of it, so the reference keeps both apart.
std::string case_id(const std::string& family, int draw, const std::string& suffix) {
  return fmt::format("{}-{}{}", family, draw, suffix);
}

// The memory facts of a session's first drawn case (its figures) and of its device.
MemoryFacts facts_of(const ReferenceSession& session, const json& first, const Protocol& protocol,
                     int evaluations_per_device, bool sessions_ahead = false) {
  MemoryFacts f;
  const json memory = session.loaded.value("memory", json::object());
  f.device = memory.value("kind", "") == "device";
  f.total_bytes = memory.value("total_bytes", 0.0);
  f.free_bytes = memory.value("free_bytes", 0.0);
  const json bytes = first.value("bytes", json::object());
  // The truth's per-element sensitivity (float32, output-sized, the elementwise budget) stays
  // resident beside it, in a case and in a timing set alike.
  f.judged_bytes = bytes.value("judged", 0.0) + bytes.value("sensitivity", 0.0);
  f.case_bytes = bytes.value("inputs", 0.0) + bytes.value("state", 0.0) + f.judged_bytes;
  f.draw_peak_bytes = bytes.value("draw_peak", 0.0);
  f.sensitivity_peak_bytes = bytes.value("sensitivity_peak", 0.0);
  f.forward_peak_bytes = bytes.value("forward_peak", 0.0);
  f.model_bytes = session.loaded.value("sizes", json::object()).value("state_bytes", 0.0);
  for (const auto& b : first.value("baselines", json::object()).value("tf32", json::array())) {
    double n = 1;
    for (const auto& d : b.value("shape", json::array())) n *= d.get<double>();
    f.output_bytes += n * dtype_bytes(b.value("dtype", "float32"));
  }
  f.cases = 0;
  for (const auto& family : protocol.families) f.cases += family.draws;
  f.evaluations_per_device = evaluations_per_device;
  f.sessions_ahead = sessions_ahead;
  return f;
}

}  // namespace

ProblemSizes loaded_sizes(const json& loaded) {
  if (!loaded.is_object()) return {};  // not loaded
  const json sizes = loaded.value("sizes", json::object());
  return {sizes.value("input_bytes", 0.0), sizes.value("state_bytes", 0.0),
          sizes.value("output_bytes", 0.0), sizes.value("forward_peak_bytes", 0.0)};
}

bool loaded_on_host(const json& loaded) { return loaded.value("placed", "device") == "host"; }

double loaded_device_bytes(const json& loaded) {
  if (!loaded.is_object()) return 0;
  const json memory = loaded.value("memory", json::object());
  return memory.value("kind", "") == "device" ? memory.value("total_bytes", 0.0) : 0.0;
}

bool loaded_needs_device_alone(const json& loaded, int evaluations_per_device) {
  return needs_device_alone(loaded_sizes(loaded), loaded_device_bytes(loaded),
                            evaluations_per_device);
}

bool loaded_needs_whole_device(const json& loaded) {
  return needs_whole_ledger(loaded_sizes(loaded), loaded_device_bytes(loaded));
}

double loaded_working_bytes_before_drawing(const json& loaded) {
  if (loaded.value("memory", json::object()).value("kind", "") != "device") return 0;
  return working_bytes_before_drawing(loaded_sizes(loaded));
}

double dtype_bytes(const std::string& dtype) {
  if (dtype == "float64" || dtype == "int64" || dtype == "complex64") return 8;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  return 4;
}

json case_list(const Protocol& protocol, const json& redraw, const json& default_set) {
  const std::string suffix =
      redraw == default_set ? "" : "~" + sha256_hex(redraw.dump()).substr(0, 8);
  json cases = json::array();
  for (const auto& f : protocol.families) {
    for (int draw = 0; draw < f.draws; ++draw) {
      cases.push_back({{"id", case_id(f.name, draw, suffix)},
                       {"family", f.name},
                       {"draw", draw},
                       {"redraw", redraw},
                       {"drawn", false}});
    }
  }
  return cases;
}

json ensure_case(ReferenceSession& session, json& c, const fs::path& problem,
                 const ReferenceCall& call, bool pin) {
  json request = {{"secret", session.secret}, {"id", c["id"]},         {"family", c["family"]},
                  {"draw", c["draw"]},        {"redraw", c["redraw"]}, {"pin", pin}};
  if (c.value("perturb", false)) request["perturb"] = true;  // the perturbed re-check's case
  auto response = call(worker_request(cmd::kPrepareCase, request));
  require_reference_answer(response, problem, "drawing a hidden case");
  if (!c.value("drawn", false)) {
    // The figures of its first draw stand for the case: a draw again (after it was let go)
    // is the same draw, from the same secret.
    for (const auto& [k, v] : response.result.items()) {
      if (k != "cached" && k != "seconds" && k != "store") c[k] = v;
    }
    c["drawn"] = true;
  }
  return response.result;
}

void draw_session_cases(ReferenceSession& session, const Protocol& protocol, const json& redraw,
                        const fs::path& problem, const ReferenceCall& call,
                        int evaluations_per_device, bool sessions_ahead, double ahead_bytes) {
  session.prepared = {
      {"cases", case_list(protocol, redraw, default_redraw(session.loaded, protocol))}};
  session.prepared_redraw = redraw;
  session.audit.reset();
  ++session.preparations;
  auto& cases = session.prepared["cases"];
  if (cases.empty()) return;
  // The first case gives the sizes the memory plan needs; the plan sets the reference's budget.
  ensure_case(session, cases[0], problem, call, /*pin=*/false);
  const MemoryFacts first =
      facts_of(session, cases[0], protocol, evaluations_per_device, sessions_ahead);
  if (!session.plan) {
    session.plan = plan_memory(first);
    // An operator's (and the tests') override of the case budget: 0 streams one case at a time
    // on any machine, the path KernelBench's largest problems take on the GPU.
    if (const char* env = std::getenv("KBV_CASE_CACHE_BYTES"); env && *env) {
      const double bytes = std::strtod(env, nullptr);
      const double per_case = std::max(1.0, first.case_bytes);
      session.plan->cache_bytes = bytes;
      session.plan->cached_cases =
          std::min(static_cast<int>(cases.size()), static_cast<int>(bytes / per_case));
      session.plan->fits = fmt::format("{} of {} cases resident (KBV_CASE_CACHE_BYTES={})",
                                       session.plan->cached_cases, cases.size(), env);
    }
    auto set = call(worker_request(cmd::kSetPlan, {{"cache_bytes", session.plan->cache_bytes}}));
    require_reference_answer(set, problem, "setting the memory plan");
  }
  // Drawn ahead only as far as they stay resident: the others are drawn when used. One call per
  // case, so a timing run of another evaluation on the device waits for one draw, not all.
  // Ahead of the evaluation, also only as far as the kept cases and the next draw's peak stay
  // within what the session reserved.
  // (A later draw may measure the sensitivity the first deferred: its estimated peak counts.)
  const double next_draw_peak = std::max(first.draw_peak_bytes, first.sensitivity_peak_bytes);
  for (size_t i = 1; i < cases.size() && static_cast<int>(i) < session.plan->cached_cases; ++i) {
    if (static_cast<double>(i) * first.case_bytes + next_draw_peak > ahead_bytes) break;
    ensure_case(session, cases[i], problem, call, /*pin=*/false);
  }
}

AheadPermit permit_ahead(MemoryLedger* ahead, const json& loaded) {
  AheadPermit permit;
  const json memory = loaded.value("memory", json::object());
  const double device_bytes = memory.value("total_bytes", 0.0);
  if (ahead == nullptr || memory.value("kind", "") != "device" || device_bytes <= 0) {
    permit.note = "drawn ahead";
    return permit;
  }
  ahead->size_once(device_bytes * kAheadShare);
  const double gb = 1e9;
  const double draw = loaded_working_bytes_before_drawing(loaded);
  if (auto granted = ahead->try_reserve(draw)) {
    permit.reservation = std::move(granted);
    permit.bytes = draw;
    permit.note = fmt::format("drawn ahead within {:.1f} GB reserved", draw / gb);
    return permit;
  }
  const std::string why = fmt::format(
      "its draw may need {:.1f} GB, more than the {:.1f} GB of the device's share "
      "for work ahead ({:.1f} GB of it held)",
      draw / gb, ahead->capacity() / gb, ahead->reserved_bytes() / gb);
  if (loaded_on_host(loaded)) {
    // Its model waits in host memory; the evaluation places it under its own reservation.
    permit.scope = AheadPermit::Scope::load;
    permit.bytes = 0;
    permit.note = "loaded ahead on the host, placed and drawn by its evaluation: " + why;
    return permit;
  }
  const double model = 2 * loaded.value("sizes", json::object()).value("state_bytes", 0.0);
  if (auto granted = ahead->try_reserve(model)) {
    permit.scope = AheadPermit::Scope::load;
    permit.reservation = std::move(granted);
    permit.bytes = model;
    permit.note = "loaded ahead, drawn by its evaluation: " + why;
    return permit;
  }
  permit.scope = AheadPermit::Scope::none;
  permit.bytes = 0;
  permit.note =
      fmt::format("started by its evaluation: its model ({:.1f} GB) and {}", model / gb, why);
  return permit;
}

bool spare_references_wanted(const std::string& device) {
  if (const char* value = std::getenv("KBV_SPARE_REFERENCES"); value && *value) {
    return std::string(value) != "0";
  }
  return device.starts_with("cuda");
}

namespace {

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

// Everything a reference worker's start depends on (worker_options and the run directory's
// place); the problem is not among it: the worker learns it from load_problem.
std::string spare_settings(const EvalRequest& request) {
  return fmt::format("{}|{}|{}|{}|{}", request.settings.size, request.settings.sandbox,
                     request.limits.reference_address_space_bytes,
                     request.placement.work_dir.string(), request.placement.keep_work_dir);
}

// A session with nothing but its own run directory (no key, no worker yet).
std::unique_ptr<ReferenceSession> session_with_run_dir(const EvalRequest& request) {
  auto session = std::make_unique<ReferenceSession>();
  session->keep_run_dir = request.placement.keep_work_dir;
  auto dir = make_run_dir(request.placement.work_dir, request.placement.keep_work_dir);
  session->run_dir = dir.path;
  session->run_dir_owner = std::move(dir.owner);
  return session;
}

// The slot's spare for a new session, when it was started for the same settings and its worker
// is alive and silent (no answer, no exit: waiting for its first request); a new spare starts
// in its place either way. nullptr without a slot or the setting, or when a start failed (the
// session then starts its own worker, and reports that start's failure).
std::unique_ptr<ReferenceSession> take_spare(const EvalRequest& request) {
  auto* slot = request.placement.reference;
  // Kept folders are for reading a session's log afterwards: a spare never used has none.
  if (!slot || !request.placement.spare_reference || request.placement.keep_work_dir) {
    return nullptr;
  }
  const std::string settings = spare_settings(request);
  std::unique_ptr<ReferenceSession> taken;
  if (slot->spare && slot->spare_settings == settings && slot->spare->worker &&
      !slot->spare->worker->ready(std::chrono::milliseconds(0))) {
    taken = std::move(slot->spare);
    taken->from_spare = true;
  }
  slot->spare.reset();  // one that was not taken stops here, its folder removed
  try {
    auto spare = session_with_run_dir(request);
    spare->worker = start_reference_worker(request, spare->run_dir);
    slot->spare = std::move(spare);
    slot->spare_settings = settings;
  } catch (const std::exception&) {
    slot->spare.reset();  // tried again at the next session
  }
  return taken;
}

// A new session: its own run directory and secret seed; its worker the slot's spare when there
// is one (else started by the caller).
std::unique_ptr<ReferenceSession> new_reference_session(const EvalRequest& request,
                                                        const ReferenceKey& key) {
  auto fresh = take_spare(request);
  if (!fresh) fresh = session_with_run_dir(request);
  fresh->key = key;
  fresh->problem = fs::absolute(request.problem);
  fresh->secret = random_secret();
  fresh->key.secret_sha256 = sha256_hex(fresh->secret);
  return fresh;
}

}  // namespace

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

std::unique_ptr<ReferenceSession> start_reference_session(const EvalRequest& request,
                                                          bool load_only) {
  const Protocol protocol =
      protocol_by_name(request.settings.protocol, request.settings.hidden_draws);
  auto session = new_reference_session(
      request, requested_key(request, protocol, sha256_file(request.problem)));
  if (!session->worker) session->worker = start_reference_worker(request, session->run_dir);
  session->started_pid = static_cast<int>(session->worker->pid());
  // The problem is loaded and its cases drawn on a thread of the session's own, each call under
  // the device's gate like any evaluation's (a timing run on the device excludes them); the
  // evaluation that takes the session joins it first. A failure leaves the session unused: the
  // evaluation starts a new one and reports the failure itself.
  session->preparing = std::thread([s = session.get(), request, protocol, load_only] {
    // However the preparation ends, whoever awaits its load's answer is told: a load that
    // failed never answers (-2), and a wait left at -1 would never end.
    struct TellsTheAnswer {
      ReferenceSession* s;
      ~TellsTheAnswer() {
        int unknown = -1;
        s->needs_whole_device.compare_exchange_strong(unknown, -2);
        s->needs_whole_device.notify_all();
      }
    } tells{s};
    try {
      ReferenceCall off_gate = [&](const json& message) {
        return s->worker->call(message, reference_timeout(request.limits));
      };
      auto call = [&](const json& message) {
        DeviceGate::Hold hold;
        if (request.placement.gate) hold = request.placement.gate->shared();
        return off_gate(message);
      };
      // Beside the evaluations in progress, only what the device's share for work ahead holds
      // at once (permit_ahead); the rest is left to the evaluation, whose memory is reserved.
      // Without that share (no gate) a problem too large to share the device is drawn by its
      // own evaluation, which has the device alone by then. With it, the model is loaded on
      // the host and placed on the device only within a reservation.
      auto* gate = request.placement.gate;
      load_problem_into(*s, request, call, /*on_host=*/gate != nullptr, &off_gate);
      s->needs_whole_device = loaded_needs_whole_device(s->loaded) ? 1 : 0;
      s->needs_whole_device.notify_all();
      if (load_only) {
        s->ahead_note = "loaded before its evaluation, which placed and drew it";
        s->prepared_ahead = true;
        return;
      }
      AheadPermit permit = permit_ahead(gate ? &gate->ahead() : nullptr, s->loaded);
      s->ahead_note = permit.note;
      if (permit.scope == AheadPermit::Scope::none) {
        s->worker->stop();  // its loaded model goes; the evaluation starts a new session
        s->ahead_error = permit.note;
        return;
      }
      s->ahead_memory = std::move(permit.reservation);
      const bool alone =
          !gate && loaded_needs_device_alone(s->loaded, request.placement.evaluations_per_device);
      if (permit.scope == AheadPermit::Scope::draw && !alone) {
        if (loaded_on_host(s->loaded)) {
          // Its reservation counts the model's state (loaded_working_bytes_before_drawing).
          auto placed = call(worker_request(cmd::kPlaceModel));
          require_reference_answer(placed, request.problem, "placing the model drawn ahead");
        }
        // Within what it reserved, also where the draw needs more than the estimate said.
        if (s->ahead_memory && s->ahead_memory->held()) {
          auto capped = call(worker_request(cmd::kCapMemory, {{"bytes", permit.bytes}}));
          require_reference_answer(capped, request.problem, "capping the draw ahead");
          s->ahead_capped = capped.result.value("capped", false);
        }
        draw_session_cases(*s, protocol, default_redraw(s->loaded, protocol), request.problem, call,
                           request.placement.evaluations_per_device,
                           request.placement.sessions_ahead, permit.bytes);
      }
      s->prepared_ahead = true;
    } catch (const std::exception& error) {
      s->ahead_error = error.what();
    } catch (...) {
      s->ahead_error = "the preparation failed with an unknown exception";
    }
  });
  return session;
}

bool keep_sessions_ahead(ReferenceSlot& slot, const fs::path& this_problem,
                         const std::optional<fs::path>& next_problem) {
  std::erase_if(slot.ahead, [&](const auto& entry) {
    return entry.first != this_problem && entry.first != next_problem;
  });
  return next_problem && *next_problem != this_problem && !slot.ahead.contains(*next_problem);
}

bool await_needs_whole_device(ReferenceSession& session) {
  auto t = Clock::now();
  auto since = std::chrono::system_clock::now();
  session.needs_whole_device.wait(-1);
  // The pid the session started with: the worker's own may change under `preparing`.
  if (session.started_pid > 0) {
    orchestrate::trace_wait(session.started_pid, "wait_load", since, seconds_since(t));
  }
  return session.needs_whole_device.load() == 1;
}

ReferenceLease acquire_reference(const EvalRequest& request, const ReferenceKey& want) {
  ReferenceLease lease;
  const fs::path problem = fs::absolute(request.problem);
  auto* slot = request.placement.reference;
  // A kept session is reused while its reference answers and none of its library plans was
  // chosen, or replaced, for want of device memory since (python/kbv/plan_pressure.py: its
  // baseline would be refused; a new process chooses them again).
  auto answers_with_room = [](ReferenceSession& s) {
    auto ping = s.worker->call(worker_request(cmd::kPing), std::chrono::seconds(30));
    return ping.ok() && ping.result.value("plans_under_pressure", json::object()).empty();
  };
  if (slot && slot->session && slot->session->key.same_request(want) &&
      slot->session->problem == problem && slot->session->worker &&
      answers_with_room(*slot->session)) {
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
      auto since = std::chrono::system_clock::now();
      if (ahead && ahead->preparing.joinable()) ahead->preparing.join();
      lease.ahead_wait_s = seconds_since(t);
      if (ahead && ahead->worker && ahead->worker->pid() > 0) {
        orchestrate::trace_wait(static_cast<int>(ahead->worker->pid()), "wait_ahead", since,
                                lease.ahead_wait_s);
      }
      // Why it was not used, in the result (a draw ahead that chose a library plan under its
      // cap, say, refused by its reference).
      if (ahead && !ahead->ahead_error.empty()) lease.ahead_dropped = ahead->ahead_error;
      if (ahead && ahead->ahead_error.empty() && ahead->key.same_request(want) && ahead->worker &&
          !ahead->worker->ready(std::chrono::milliseconds(0))) {
        fresh = std::move(ahead);
        lease.started_ahead = true;
        // Its cases now count in the cache's share, its draws in the evaluation's reservation.
        fresh->ahead_memory.reset();
        if (fresh->ahead_capped &&
            !fresh->worker
                 ->call(worker_request(cmd::kCapMemory, {{"bytes", 0}}), std::chrono::seconds(30))
                 .ok()) {
          fresh.reset();  // started again below
          lease.started_ahead = false;
        }
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
