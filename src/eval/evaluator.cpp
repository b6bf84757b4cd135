#include "eval/evaluator.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "core/clock.hpp"
#include "core/hash.hpp"
#include "eval/case_path.hpp"
#include "eval/exchange.hpp"
#include "eval/harness_faults.hpp"
#include "eval/held_memory.hpp"
#include "eval/memory_plan.hpp"
#include "eval/phases.hpp"
#include "eval/reference_work.hpp"
#include "judge/audit.hpp"
#include "judge/run_dir_listing.hpp"
#include "judge/state_match.hpp"
#include "judge/verdict.hpp"
#include "orchestrate/build_cache.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;
using orchestrate::Response;
using orchestrate::worker_request;
namespace cmd = orchestrate::cmd;

namespace {

// The worker started ahead for this candidate when there is one still waiting (it has said
// nothing since its start), else a new one.
std::shared_ptr<CandidateWorker> take_candidate_worker(const EvalRequest& request,
                                                       const std::string& candidate_sha256,
                                                       bool& started_ahead) {
  const auto& ahead = request.placement.prestarted;
  started_ahead = ahead && ahead->process && ahead->candidate == fs::absolute(request.candidate) &&
                  !ahead->process->ready(std::chrono::milliseconds(0));
  return started_ahead ? ahead : start_candidate_worker(request, candidate_sha256);
}

// One evaluation: the reference lease and the candidate's worker (their lifetimes), the
// findings and the stage failure; the phases themselves are eval/phases.hpp.
class Evaluation {
 public:
  explicit Evaluation(const EvalRequest& request)
      : request_(request),
        protocol_(protocol_by_name(request.settings.protocol, request.settings.hidden_draws)) {}

  Result run() {
    auto started = Clock::now();
    Result result;
    result.protocol = protocol_.to_json();
    // Whether PyTorch rewrites are accepted: the library flags' severity (judge::LibraryPolicy).
    result.protocol["allow_library"] = request_.settings.allow_library;
    result.protocol["library_flags"] =
        judge::LibraryPolicy{protocol_.name == "verified", request_.settings.allow_library,
                             request_.settings.audit}
                .rejects()
            ? "reject"
            : "warn";
    result.candidate = {{"path", fs::absolute(request_.candidate).string()}};
    result.limits = request_.limits.to_json();
    std::optional<HarnessFault> fault;  // kbv's own failure: harness_error, not a verdict
    bool ended_early = false;           // by an exception: a fault, or the candidate's failure
    try {
      run_phases(result);
      after_the_candidate_ended();
      check_run_dir();
    } catch (const UsageError&) {
      release(/*discard_session=*/true);
      throw;
    } catch (const std::exception& error) {
      // Everything else that ends an evaluation early is a harness fault (eval/harness_faults),
      // unless it may be the candidate's doing (a disk it filled, an answer kbv cannot read, a
      // reference it could reach).
      CandidateState candidate{
          exchange_ && exchange_->candidate_answers() > 0, candidate_ran_,
          worker_ && worker_->process ? worker_->process->isolation() : json::object()};
      auto outcome = fault_outcome(error, stage_in_words(exchange_ ? exchange_->stage() : "start"),
                                   disk_places(), candidate);
      if (outcome.fault) weigh_held_memory(outcome, result);
      fault = std::move(outcome.fault);
      if (outcome.candidate_failure) failure_ = outcome.candidate_failure;
      if (!outcome.error_detail.empty()) result.error_detail = outcome.error_detail;
      discard_session_ = true;  // a dead or unsure reference, a full disk: start afresh
      ended_early = true;
    } catch (...) {
      release(/*discard_session=*/true);
      throw;
    }
    if (ended_early) checks_after_ending_early(fault ? &*fault : nullptr);
    if (lease_.session) {
      result.problem["reference"] = lease_.session->record(lease_.reused);
      if (!lease_.ahead_dropped.empty()) {
        result.problem["reference"]["ahead_dropped"] = lease_.ahead_dropped;
      }
      if (lease_.started_ahead) {
        result.problem["reference"]["started_ahead"] = true;
        result.problem["reference"]["prepared_ahead"] = lease_.session->prepared_ahead;
        if (!lease_.session->ahead_note.empty()) {
          result.problem["reference"]["ahead"] = lease_.session->ahead_note;
        }
        result.problem["reference"]["ahead_wait_s"] = lease_.ahead_wait_s;
      }
    }
    record_split(result, seconds_since(started));
    findings_.into(result);
    if (fault && fault_outweighed_) {
      judge::decide_verdict(result, failure_);  // the candidate's tampering decides
    } else if (fault) {
      result.verdict = Verdict::HarnessError;
      result.reason = fault->reason();
      result.harness_fault = std::move(fault);
    } else {
      judge::decide_verdict(result, failure_);
    }
    release(discard_session_ || findings_.has("run_dir_tampered"));
    return result;
  }

 private:
  void say(const std::string& line) const {
    if (request_.placement.progress) request_.placement.progress(line);
  }

  // A phase's failure ends the evaluation (its detail is the result's error_detail), unless the
  // facts make it kbv's own (a full disk kbv writes to): then a harness fault.
  bool failed(const std::optional<judge::FailedStage>& stage, Result& result) {
    if (!stage) return false;
    if (auto fault = candidate_disk_fault(*stage, disk_places())) {
      throw judge::HarnessFaultError(*fault, stage->detail);
    }
    failure_ = stage->failure;
    weigh_own_out_of_memory(
        *failure_,
        stage->detail.empty() ? failure_->reason : failure_->reason + "\n" + stage->detail, result);
    result.error_detail = stage->detail;
    return true;
  }

  void run_phases(Result& result) {
    if (!fs::is_regular_file(request_.problem)) {
      throw UsageError(fmt::format("problem file {} does not exist", request_.problem.string()));
    }
    if (!fs::is_regular_file(request_.candidate)) {
      throw UsageError(
          fmt::format("candidate file {} does not exist", request_.candidate.string()));
    }
    // Each file hashed once: the reference key, the build-cache folder and the result use it.
    const std::string problem_sha256 = sha256_file(request_.problem);
    const std::string candidate_sha256 = sha256_file(request_.candidate);
    candidate_sha256_ = candidate_sha256;
    lease_ = acquire_reference(request_, requested_key(request_, protocol_, problem_sha256));
    ReferenceSession& session = *lease_.session;
    // Both workers start (and import torch) side by side.
    bool started_ahead = false;
    worker_ = take_candidate_worker(request_, candidate_sha256, started_ahead);
    if (started_ahead) result.candidate["worker_started_ahead"] = true;
    result.isolation = worker_->process->isolation();
    exchange_.emplace(session, *worker_, request_.placement.gate, request_.limits);
    WorkerExchange& workers = *exchange_;
    cases_.emplace(workers, session, protocol_, request_.problem);
    if (request_.placement.gate && request_.placement.evaluations_per_device > 1) {
      // The sensitivity's float64 runs, left out of the plan's working bytes where the first
      // draw deferred them: reserved when a draw or a judge needs them (docs/case-path.md).
      workers.on_sensitivity_room(
          [&session] {
            return session.plan && !session.plan->alone && session.plan->sensitivity_bytes > 0;
          },
          [this, &workers, &session] {
            say("making room for the sensitivity's float64 runs");
            // (A request for a case in use waits on this: its cases stay, should it wait anew.)
            reserve_device_memory(workers, session,
                                  session.plan->working_bytes + session.plan->sensitivity_bytes,
                                  /*cases_in_use=*/true);
          });
    }
    CandidateSide side{request_.problem,
                       workers,
                       protocol_,
                       *cases_,
                       findings_,
                       call_judge_,
                       request_.placement.progress,
                       request_.settings.audit,
                       request_.settings.allow_library,
                       request_.settings.cuda()};

    if (session.loaded.is_null()) {  // else reused or loaded ahead
      say("loading the problem");
      // Under a gate (kbv run, kbv serve), loaded as a session started ahead is: on the host and
      // outside the gate, the model placed by the first call that uses it (under the gate and
      // this evaluation's reservation). Under the gate, a load waited for (a fresh worker's
      // start, a cold meta forward: 10-15 s for the recurrent problems) held back a timing run
      // waiting to start, and every other evaluation behind it: 143 s of session 29's 1,059 s
      // H200 audit passed with nothing but such loads in flight.
      const ReferenceCall off_gate = [&](const json& m) { return workers.reference_off_gate(m); };
      load_problem_into(session, request_, workers.reference_call(),
                        /*on_host=*/request_.placement.gate != nullptr, &off_gate);
    }
    describe_problem(result, session, problem_sha256, candidate_sha256);
    workers.send_candidate(worker_request(cmd::kLoadCandidate,
                                          {{"candidate", fs::absolute(request_.candidate).string()},
                                           {"device", request_.settings.device},
                                           {"init_inputs", session.loaded["init_inputs"]}}));
    candidate_ran_ = true;  // its import-time code runs from here on

    // The reference draws every case while the candidate builds (once per problem and key).
    auto t = Clock::now();
    workers.set_stage("reference");
    say("drawing input families and golden outputs");
    // Device memory for the evaluation's peak, reserved where others share the device: from
    // the problem's inputs before any case is drawn, then from the memory plan after the first
    // (what the first draw measured).
    reserve_device_memory(workers, session, loaded_working_bytes_before_drawing(session.loaded),
                          /*cases_in_use=*/false);
    prepare(session, default_redraw(session.loaded, protocol_), workers);
    result.durations_s["reference"] = seconds_since(t) + lease_.ahead_wait_s;
    if (session.plan) {
      reserve_device_memory(workers, session, session.plan->working_bytes,
                            /*cases_in_use=*/false);
    }

    t = Clock::now();
    workers.set_stage("candidate_load");
    say("building and loading the candidate");
    Response loaded = workers.receive_candidate(request_.limits.compile_timeout);
    compile_s_ = seconds_since(t);
    result.durations_s["candidate_load"] = compile_s_;
    if (!loaded.ok()) {
      failed(judge::load_failure(loaded, request_.limits.compile_timeout), result);
      return;
    }
    result.candidate["import_seconds"] = loaded.result.value("import_seconds", 0.0);
    check_loaded_libraries(loaded.result);
    call_judge_.numerics(loaded.result, findings_);
    judge::CallJudge::harness(loaded.result, "importing and constructing the candidate", findings_);
    // Static scan of the candidate's source by the (trusted) reference worker: evidence only.
    auto scan = workers.reference_off_gate(
        worker_request(cmd::kScan, {{"candidate", fs::absolute(request_.candidate)}}));
    if (scan.ok()) {
      result.candidate["scan"] = scan.result;
      judge::judge_static_scan(scan.result, findings_);
    } else {
      // Recorded, not dropped: a scan that fails without a word is a way past its evidence.
      findings_.add("scan_error", Severity::Warn,
                    fmt::format("static scan: it did not complete ({})", scan.message));
    }
    match_parameters(session, loaded.result, workers);
    listing_ = judge::list_run_dir(session.run_dir);

    t = Clock::now();
    workers.set_stage("correctness");
    auto correctness = check_correctness(side, session.prepared["cases"]);
    result.correctness = correctness.families;
    result.durations_s["correctness"] = seconds_since(t);
    note_replacements(session.prepared["cases"]);
    if (failed(correctness.failed, result)) return;
    audit(result, session, session.prepared["cases"]);

    // The re-checks only run on a candidate that passed every case: what they catch (caches,
    // nondeterminism, library calls, ghost kernels) matters only for one that would be correct.
    const bool all_correct = correctness.all_passed();
    std::optional<json> trace_case;
    if (all_correct && !findings_.has_reject()) {
      t = Clock::now();
      workers.set_stage("rechecks");
      auto rechecks = run_rechecks(side, session.prepared["cases"]);
      result.durations_s["rechecks"] = seconds_since(t);
      if (failed(rechecks.failed, result)) return;
      result.candidate["rechecks"] = rechecks.record;
      trace_case = rechecks.trace_case;
    }
    // The operator trace comes before timing: a forward that leaves the main computation to
    // PyTorch is rejected without being timed (9 of 35 timed results in the H200 suite run).
    TraceRecord trace;
    if (trace_case) {
      t = Clock::now();
      workers.set_stage("trace");
      trace = trace_operators(side, *trace_case);
      if (!trace.record.is_null()) result.candidate["trace"] = trace.record;
      result.durations_s["trace"] = seconds_since(t);
      failed(trace.failed, result);
    }
    if (all_correct && !findings_.has_reject() && !failure_ && request_.settings.measure) {
      t = Clock::now();
      workers.set_stage("measurement");
      measure(result, session, side);
      result.durations_s["measurement"] = seconds_since(t);
    }
    // The kernel trace comes last. It records through kbv_native's CUPTI tracer, but falls back
    // to torch.profiler where that tracer is unavailable, and torch.profiler (kineto) keeps
    // CUPTI's only subscriber slot for the rest of the worker's life, which the measurement's
    // kernel audit and memory tracer need (on the H200 they reported
    // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED while a torch.profiler trace ran first).
    // Also for a candidate the operator trace rejected: the kernel trace may clear its
    // kernel_never_called (a CUDA graph replaying the candidate's own kernels).
    if (trace.operators && !failure_) {
      t = Clock::now();
      workers.set_stage("trace");
      trace_kernels(side, *trace_case, result.candidate.value("scan", json::object()), trace);
      result.candidate["trace"] = trace.record;
      result.durations_s["trace"] = result.durations_s.value("trace", 0.0) + seconds_since(t);
      failed(trace.failed, result);
    }
  }

  // The libraries the candidate's worker loaded from its build-cache folder, as it recorded them
  // at the load; each must be the one first built and loaded for this content (the manifest
  // beside the folder, which no candidate can write).
  void check_loaded_libraries(const json& loaded) {
    if (candidate_sha256_.empty()) return;
    const auto cache = orchestrate::extension_cache_dir(
        request_.placement.cache_dir, candidate_sha256_, request_.settings.device);
    loaded_libraries_ =
        orchestrate::loaded_libraries(loaded.value("extension_files", json::object()), cache);
    auto mismatches = orchestrate::manifest_mismatches(cache, loaded_libraries_);
    if (!mismatches.empty()) {
      findings_.add("build_cache_tampered", Severity::Reject,
                    fmt::format("the candidate loaded a library its build cache did not hold when "
                                "this content was first built and loaded: {}",
                                json(mismatches).dump()));
    }
  }

  // The reference ran out of device memory while the candidate's code had run: when the
  // candidate's processes held more than the whole evaluation's plan, the fault is its doing
  // (judge/held_memory.hpp). Read at once from the driver, per process; the figures go in the
  // result either way. Never throws: a reading kbv cannot take leaves the fault kbv's.
  void weigh_held_memory(FaultOutcome& outcome, Result& result) {
    if (!weighs_held_memory(*outcome.fault, request_.settings.cuda())) return;
    auto held = held_memory_now(result);
    if (!held) return;
    if (judge::held_beyond_plan(*held)) {
      outcome.candidate_failure =
          judge::StageFailure{Verdict::RuntimeError, judge::held_memory_reason(*held)};
      if (outcome.error_detail.empty()) outcome.error_detail = outcome.fault->detail;
      outcome.fault.reset();
    } else {
      outcome.fault->detail.append("\n").append(judge::held_memory_note(*held));
    }
  }

  // The candidate's own call ran out of device memory: its runtime_error, whose reason says
  // what its processes held where that was beyond the plan (a hog's own next allocation can fail
  // before the reference's: zoo memory_hog, session 19).
  void weigh_own_out_of_memory(judge::StageFailure& failure, const std::string& message,
                               Result& result) {
    if (!request_.settings.cuda() || failure.verdict != Verdict::RuntimeError ||
        !judge::reads_out_of_memory(message)) {
      return;
    }
    if (auto held = held_memory_now(result)) {
      failure.reason = judge::own_out_of_memory_reason(failure.reason, *held);
    }
  }

  // What the candidate's processes hold on the device now, recorded in the result
  // (`candidate.held_memory`); nullopt when it cannot be read. Never throws.
  std::optional<judge::HeldMemory> held_memory_now(Result& result) {
    if (!candidate_ran_ || !worker_ || !worker_->process || !lease_.session ||
        !lease_.session->worker) {
      return std::nullopt;
    }
    try {
      const ReferenceSession& session = *lease_.session;
      const double planned = session.plan ? session.plan->working_bytes
                                          : loaded_working_bytes_before_drawing(session.loaded);
      const std::string uuid =
          session.loaded.value("memory", json::object()).value("uuid", std::string());
      std::string why;
      auto held =
          candidate_held_memory(worker_->process->pid(), session.worker->pid(), uuid, planned, why);
      if (!held) {
        result.candidate["held_memory"] = {{"unknown", why}};
        return std::nullopt;
      }
      result.candidate["held_memory"] = {{"held_bytes", held->held_bytes},
                                         {"allowance_bytes", judge::held_allowance(*held)},
                                         {"reference_bytes", held->reference_bytes},
                                         {"others_bytes", held->others_bytes},
                                         {"measured_by", held->measured_by}};
      return held;
    } catch (const std::exception& error) {
      result.candidate["held_memory"] = {{"unknown", error.what()}};
      return std::nullopt;
    }
  }

  void check_run_dir(bool* complete = nullptr) {
    if (!exchange_ || listing_.empty()) return;
    bool read = true;
    auto changed =
        judge::changed_entries(listing_, judge::list_run_dir(exchange_->run_dir(), &read));
    if (complete && !read) *complete = false;
    if (!changed.empty()) {
      findings_.add("run_dir_tampered", Severity::Reject,
                    fmt::format("files of the run directory outside the candidate's scratch "
                                "space were created or changed: {}",
                                json(changed).dump()));
    }
  }

  // An evaluation an exception ended early still gets the checks made once the candidate has
  // ended: a candidate that swapped a library in its build cache, forged a line on its channel or
  // wrote into the run directory may have provoked the failure too, and a harness error (or a
  // runtime error on a shared device) is evaluated again, loading what it left. The build
  // cache's manifest is recorded either way, so the next load of this content is compared with
  // what this one loaded. Where the failure is the candidate's, a rejection found here decides
  // as on the normal path. Where it is a fault of kbv's, the evidence decides the verdict
  // (rejected, the fault noted beside it) only where it is evidence: a forged line, or a change
  // in files that could all be read (a fault of kbv's own, out of descriptors or memory, may
  // also be why a file could not be read: then the fault stands, the flags beside it). Never
  // throws.
  void checks_after_ending_early(const HarnessFault* fault) {
    bool complete = true;
    try {
      after_the_candidate_ended(&complete);
      check_run_dir(&complete);
    } catch (const std::exception&) {
      complete = false;
    }
    if (!fault) return;
    fault_outweighed_ =
        findings_.has("channel_forged") ||
        (complete && (findings_.has("build_cache_tampered") || findings_.has("run_dir_tampered")));
    if (fault_outweighed_) {
      findings_.add("harness_fault_beside_tampering", Severity::Info,
                    "the evaluation also ended early on what would have been a fault of kbv's "
                    "own (" +
                        fault->reason() + "); the candidate's tampering decides its verdict");
    }
  }

  // Once the candidate's worker has ended (asked to exit, its namespace gone with it): its
  // channel read to the end, and its build-cache folder against what it loaded from there.
  void after_the_candidate_ended(bool* complete = nullptr) {
    if (candidate_checked_ || !worker_ || !worker_->process) return;
    candidate_checked_ = true;
    worker_->process->stop();
    if (const auto& forged = worker_->process->forged()) {
      findings_.add("channel_forged", Severity::Reject,
                    "a line on the candidate's answer channel was not its worker's answer to "
                    "the request in flight: " +
                        *forged);
    }
    if (candidate_sha256_.empty() || !candidate_ran_) return;
    const auto cache = orchestrate::extension_cache_dir(
        request_.placement.cache_dir, candidate_sha256_, request_.settings.device);
    auto changes = orchestrate::build_cache_changes(cache, loaded_libraries_, complete);
    if (!changes.empty()) {
      findings_.add("build_cache_tampered", Severity::Reject,
                    fmt::format("the candidate's build-cache folder changed behind the libraries "
                                "it loaded: {}",
                                json(changes).dump()));
    }
    orchestrate::record_in_manifest(cache, loaded_libraries_);
  }

  // Where this evaluation writes, for the disk facts of a harness fault.
  DiskPlaces disk_places() const {
    DiskPlaces places;
    try {
      where_written(places);
    } catch (const std::exception&) {
      // Called while handling a failure: fewer facts, never a second failure.
    }
    return places;
  }

  void where_written(DiskPlaces& places) const {
    if (lease_.session) {
      places.run_dir = lease_.session->run_dir;
      // Nothing of a case is written to disk (docs/case-path.md): kbv needs no more room
      // there than the classifier's minimum.
      places.need_bytes = 0;
    }
    if (worker_) places.candidate_folder = worker_->folder;
    if (!candidate_sha256_.empty()) {
      places.cache_folder = orchestrate::extension_cache_dir(
          request_.placement.cache_dir, candidate_sha256_, request_.settings.device);
    }
  }

  void describe_problem(Result& result, const ReferenceSession& session,
                        const std::string& problem_sha256, const std::string& candidate_sha256) {
    const auto& r = session.loaded;
    result.problem = {{"name", r["name"]},        {"path", fs::absolute(request_.problem).string()},
                      {"sha256", problem_sha256}, {"size", request_.settings.size},
                      {"inputs", r["inputs"]},    {"degenerate", false}};
    result.candidate["sha256"] = candidate_sha256;
    result.environment = r["environment"];
    result.environment["kbv_version"] = std::string(kVersion);
    result.environment["protocol"] = protocol_.name;
    result.environment["protocol_version"] = protocol_.version;
    result.environment["seed_sha256"] = sha256_hex(session.secret);
    result.problem["reference_persistent_bytes"] = r["persistent_bytes"];
    // What the load told of the problem's sizes (the meta forward's figures among them) and
    // the estimate from them that the ledger reserves before the first draw where evaluations
    // share the device: beside the memory plan the first draw made (problem.reference.plan),
    // what says how good that estimate was.
    if (r.contains("sizes")) {
      result.problem["sizes"] = r["sizes"];
      result.problem["sizes"]["working_bytes_before_drawing"] =
          working_bytes_before_drawing(loaded_sizes(r));
    }
  }

  // The cases for `redraw` (the parameter names re-drawn): the session's own when they are for
  // the same names, else a new list (the first case drawn now, the rest when used).
  void prepare(ReferenceSession& session, const json& redraw, WorkerExchange& workers) {
    if (session.preparations == 0 || session.prepared_redraw != redraw) {
      draw_session_cases(session, protocol_, redraw, request_.problem, workers.reference_call(),
                         request_.placement.evaluations_per_device,
                         request_.placement.sessions_ahead);
    }
  }

  // Reserves `bytes` of the device's memory ledger, or more than held so far: grown beside what
  // is held (the cases drawn so far use it), else the whole anew. A reservation of the whole
  // ledger is the device's memory to this evaluation alone: recorded. `cases_in_use`: a request
  // for a case is in flight (the sensitivity's room, asked by a judge or a draw), so its cases
  // stay on the device should it wait anew; else (after the first draw) they go first.
  void reserve_device_memory(WorkerExchange& workers, const ReferenceSession& session, double bytes,
                             bool cases_in_use) {
    if (!request_.placement.gate || request_.placement.evaluations_per_device <= 1) return;
    const double device_bytes =
        session.loaded.value("memory", json::object()).value("total_bytes", 0.0);
    if (bytes <= 0 || device_bytes <= 0) return;
    MemoryLedger& ledger = request_.placement.gate->memory();
    // (Granted reservations are clamped to the capacity: holding all of it is holding enough.)
    const double capacity = ledger.capacity();
    const double wanted = capacity > 0 ? std::min(bytes, capacity) : bytes;
    if (memory_.held() && memory_.bytes() >= wanted) return;
    if (!memory_.held() || !workers.grow_memory(memory_, wanted - memory_.bytes())) {
      // Refused where waiting beside what it holds could wait forever (another growth waits for
      // it): it gives back, and after its first draw first lets go of the cases drawn, so that
      // what stays on the device in no account while it waits is its model (and the reference's
      // allocator cache) alone. They are drawn again when prepared (the same draws: the session's
      // secret). With a case in use (a judge waiting on the room) nothing goes: the judge's
      // request names blocks the reference must still hold.
      if (memory_.held() && !cases_in_use) let_go_of_cases(workers, session);
      memory_.release();
      memory_ = workers.reserve_memory(bytes, device_bytes);
    }
    const double sized = ledger.capacity();  // sized by the first reservation
    if (memory_.held() && memory_.bytes() >= sized && !alone_recorded_) {
      alone_recorded_ = true;
      findings_.add("evaluated_alone", Severity::Info,
                    fmt::format("the problem may need {:.1f} GB of device memory at its peak, "
                                "more than the {:.1f} GB the evaluations on the device may "
                                "reserve together: evaluated with the device's memory to itself",
                                bytes / 1e9, sized / 1e9));
    }
  }

  void let_go_of_cases(WorkerExchange& workers, const ReferenceSession& session) {
    if (!session.plan) return;  // nothing drawn yet
    say("giving back its device memory to wait anew: letting go of the cases drawn");
    auto let_go = workers.reference(worker_request(
        cmd::kSetPlan, {{"cache_bytes", session.plan->cache_bytes}, {"let_go", true}}));
    require_reference_answer(let_go, request_.problem, "letting go of the cases drawn");
  }

  // Draws the reference replaced (a family whose reference output was non-finite): reported.
  void note_replacements(const json& cases) {
    for (const auto& c : cases) {
      const json note = c.value("note", json());
      if (note.is_object()) {
        findings_.add("family_replaced", Severity::Info, note.value("detail", ""));
      }
    }
  }

  // How the candidate's parameters match the reference's state (by name and shape, else by
  // unique shape); a candidate that matches differently gets cases drawn for its own set.
  void match_parameters(ReferenceSession& session, const json& loaded, WorkerExchange& workers) {
    auto match = judge::match_state(session.loaded["state_spec"], loaded["state_spec"]);
    if (!match.unmatched_reference.empty()) {
      std::string names;
      for (const auto& n : match.unmatched_reference) names += (names.empty() ? "" : ", ") + n;
      findings_.add("params_unmatched", Severity::Warn,
                    fmt::format("reference state {} has no same-name, same-shape counterpart in "
                                "ModelNew; left at its seeded initial values (not re-drawn) so "
                                "both sides can still agree",
                                names));
      if (protocol_.redraw_parameters) {
        json matched = json::array();
        for (const auto& [ref, cand] : match.mapping) matched.push_back(ref);
        prepare(session, matched, workers);
      }
    }
    if (!match.renamed.empty()) {
      findings_.add("params_matched_by_shape", Severity::Info,
                    fmt::format("matched by unique shape: {}", json(match.renamed).dump()));
    }
    workers.candidate(worker_request(cmd::kSetMapping, {{"mapping", match.mapping}}));
  }

  void audit(Result& result, ReferenceSession& session, const json& cases) {
    if (!session.audit) {
      std::vector<judge::AuditCase> audit_cases;
      for (const auto& c : cases) {
        if (c.value("drawn", false)) audit_cases.push_back(judge::AuditCase::from_figures(c));
      }
      session.audit = judge::audit_problem(audit_cases);
    }
    result.problem["degenerate"] = session.audit->degenerate;
    result.problem["audit"] = session.audit->to_json();
    judge::judge_audit(*session.audit, findings_);
  }

  void measure(Result& result, ReferenceSession& session, CandidateSide& side) {
    const int timing_sets = session.plan ? session.plan->timing_sets : 1;
    auto timing = measure_timing(side, timing_sets, request_.settings);
    struct EndTiming {
      CasePath& cases;
      ~EndTiming() {
        try {
          cases.end_timing();
        } catch (const std::exception&) {
          // The session is discarded if its reference no longer answers (release()).
        }
      }
    } end_timing{side.cases};
    if (timing.seconds > 0) result.durations_s["timing"] = timing.seconds;
    if (failed(timing.failed, result) || !timing.ok) return;
    result.timing = timing.timing;
    result.speedup = timing.speedup;
    result.timing["roofline"] =
        check_roofline(side, request_.settings.cuda(), result.environment.value("device_name", ""),
                       timing.candidate_samples, session.roofline);
    auto t = Clock::now();
    auto memory = measure_memory(side, session.memory);
    if (failed(memory.failed, result)) return;
    result.durations_s["memory"] = seconds_since(t);
    result.memory = memory.memory;
  }

  void record_split(Result& result, double total) {
    double gate_wait = 0, reference = lease_.ahead_wait_s, candidate = 0;
    if (exchange_) {
      for (const auto& [stage, seconds] : exchange_->gate_wait_by_stage()) gate_wait += seconds;
      reference += exchange_->reference_seconds();
      candidate = exchange_->candidate_seconds();
    }
    result.durations_s["total"] = total;
    result.durations_s["split"] = {
        {"compile", compile_s_},
        {"reference", reference},
        {"candidate", candidate},
        {"gate_wait", gate_wait},
        {"idle", std::max(0.0, total - compile_s_ - reference - candidate - gate_wait)}};
    if (exchange_ && !exchange_->gate_wait_by_stage().empty()) {
      result.durations_s["gate_wait_by_stage"] = exchange_->gate_wait_by_stage();
    }
  }

  // The candidate's worker always goes. The reference session stays in its slot for the next
  // candidate unless this evaluation failed on the reference's side or the run directory was
  // tampered with (then nothing of it is trusted again).
  void release(bool discard_session) {
    // What was made for this candidate in the reference goes; its cases stay for the next one.
    // A reference that cannot do that is not trusted with another candidate.
    if (lease_.session && lease_.session->worker && exchange_ && !discard_session) {
      auto ended = lease_.session->worker->call(worker_request(cmd::kEndCandidate),
                                                reference_timeout(request_.limits));
      if (!ended.ok()) discard_session = true;
    }
    cases_.reset();
    exchange_.reset();
    // Stopped now, whoever else holds the worker (kbv run's request until the evaluation
    // returns): a live CUDA context must not outlast the evaluation into a retry or a health
    // check. The last holder removes its folder.
    if (worker_ && worker_->process) worker_->process->stop();
    worker_.reset();
    lease_.owned.reset();
    auto* slot = request_.placement.reference;
    if (slot && slot->session && discard_session) slot->session.reset();
    lease_.session = nullptr;
    memory_.release();
  }

  const EvalRequest& request_;
  const Protocol protocol_;
  ReferenceLease lease_;
  std::shared_ptr<CandidateWorker> worker_;
  std::optional<WorkerExchange> exchange_;
  std::optional<CasePath> cases_;
  MemoryLedger::Reservation memory_;  // device memory for its peak (memory plan)
  bool alone_recorded_ = false;
  judge::Findings findings_;
  judge::CallJudge call_judge_;
  std::optional<judge::StageFailure> failure_;
  judge::RunDirListing listing_;  // the run directory once the candidate may read it
  double compile_s_ = 0;
  std::string candidate_sha256_;
  std::vector<orchestrate::LoadedLibrary> loaded_libraries_;
  bool discard_session_ = false;
  // A fault ended it, but the candidate's tampering found after it decides
  // (checks_after_ending_early).
  bool fault_outweighed_ = false;
  bool candidate_checked_ = false;  // after_the_candidate_ended ran
  bool candidate_ran_ = false;
};

}  // namespace

Result evaluate(const EvalRequest& request) { return Evaluation(request).run(); }

}  // namespace kbv::eval
