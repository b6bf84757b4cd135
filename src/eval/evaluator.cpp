#include "eval/evaluator.hpp"

#include <fmt/format.h>
#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <set>
#include <thread>

#include "check/compare.hpp"
#include "core/hash.hpp"
#include "eval/audit.hpp"
#include "eval/device_gate.hpp"
#include "eval/guards.hpp"
#include "eval/kernel_trace.hpp"
#include "eval/measurement.hpp"
#include "eval/protocol.hpp"
#include "eval/reference_session.hpp"
#include "eval/roofline.hpp"
#include "eval/state_match.hpp"
#include "eval/suite.hpp"
#include "eval/verdict.hpp"
#include "orchestrate/worker_process.hpp"
#include "stats/summary.hpp"
#include "tensor/safetensors.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;
using orchestrate::Response;
using orchestrate::WorkerProcess;
using Clock = std::chrono::steady_clock;

namespace {

std::string random_secret() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    throw std::runtime_error("cannot read /dev/urandom for the secret seed");
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

// Run directories (the reference's) and candidate folders share one parent, which each
// candidate sees replaced by an empty tmpfs holding only its own folder: other runs' golden
// outputs and other candidates' files are out of its sight.
fs::path make_private_dir(const fs::path& root, const char* prefix,
                          std::initializer_list<const char*> subs) {
  // Absolute and normal: the reference's answers carry normalised paths, which the candidate's
  // requests are rewritten from (rebase_paths).
  fs::path base = fs::absolute((root.empty() ? fs::temp_directory_path() : root) / "kbv-runs")
                      .lexically_normal();
  fs::create_directories(base);
  std::string pattern = (base / fmt::format("{}-XXXXXX", prefix)).string();
  if (!::mkdtemp(pattern.data())) {
    throw std::runtime_error(fmt::format("cannot create a folder under {}", base.string()));
  }
  fs::path dir(pattern);
  for (const char* sub : subs) fs::create_directories(dir / sub);
  return dir;
}

fs::path make_run_dir(const fs::path& root) {
  return make_private_dir(root, "kbv-run", {"inputs", "state", "golden"});
}

std::map<std::string, std::string> worker_environment(const EvalRequest& request) {
  return {{"KBV_SIZE", request.size},
          {"PYTHONUNBUFFERED", "1"},
          {"PYTHONDONTWRITEBYTECODE", "1"},
          // Large blocks come from and go back to the kernel, so the resident set tracks
          // live memory and CPU peaks are measurable.
          {"MALLOC_MMAP_THRESHOLD_", "65536"},
          // Idle OpenMP threads sleep instead of spinning: the worker that is not being timed
          // must not steal the cores of the one that is.
          {"OMP_WAIT_POLICY", "PASSIVE"}};
}

// Makes `to` hold the regular files of `from` (hard links, copies where a link fails), and
// nothing else.
void mirror_files(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(to, ec)) fs::remove_all(entry.path(), ec);
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    if (!entry.is_regular_file()) continue;
    auto target = to / entry.path().filename();
    std::error_code link_error;
    fs::create_hard_link(entry.path(), target, link_error);
    if (!link_error) continue;
    std::error_code copy_error;
    fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing, copy_error);
    if (copy_error) {
      // The machine's fault (disk full, permissions), not the candidate's: nothing is stored,
      // and a rerun retries.
      throw UsageError(fmt::format("cannot give the candidate {} ({}; {})", entry.path().string(),
                                   link_error.message(), copy_error.message()));
    }
  }
}

// `value` with every string under `from` rewritten to the same path under `to`.
json rebase_paths(const json& value, const std::string& from, const std::string& to) {
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text.starts_with(from) && (text.size() == from.size() || text[from.size()] == '/')) {
      return to + text.substr(from.size());
    }
    return value;
  }
  if (value.is_array() || value.is_object()) {
    json out = value;
    for (auto& item : out) item = rebase_paths(item, from, to);
    return out;
  }
  return value;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

namespace {

// The reference is trusted code and its calls include starting torch, drawing every family
// and float64 runs: on a loaded machine they may take far longer than one candidate call,
// and a spurious timeout would mark the whole problem broken.
std::chrono::seconds reference_timeout_of(const EvalRequest& request) {
  return std::max(request.call_timeout * 4, std::chrono::seconds(600));
}

// A failed reference call ends the evaluation as the problem's fault (nothing is stored).
void require_reference_answer(const Response& response, const fs::path& problem,
                              const std::string& stage) {
  if (response.ok()) return;
  if (response.error_kind == "problem_error" || response.error_kind == "usage_error") {
    throw UsageError(fmt::format("{}: {}", problem.string(), response.message));
  }
  throw UsageError(fmt::format("the reference failed while {}: {}\n{}", stage, response.message,
                               response.detail));
}

// Inside inputs/: the candidate starts before the reference writes this file, and a directory
// bound into its sandbox shows files created later (a bound file would not exist yet).
fs::path init_inputs_file(const fs::path& run_dir) {
  return run_dir / "inputs" / "init_inputs.safetensors";
}

// One exchange with the session's reference worker (the caller holds the device's gate).
using ReferenceCall = std::function<Response(const json&)>;

void load_problem_into(ReferenceSession& session, const EvalRequest& request,
                       const ReferenceCall& call) {
  auto response = call({{"cmd", "load_problem"},
                        {"problem", fs::absolute(request.problem).string()},
                        {"device", request.device},
                        {"init_inputs_path", init_inputs_file(session.run_dir).string()}});
  require_reference_answer(response, request.problem, "loading the problem");
  session.loaded = response.result;
  session.key.software = software_of(response.result["environment"]);
}

// The parameter names re-drawn for the hidden families before any candidate is seen: every
// state tensor of the reference (a candidate whose own parameters do not all match gets a
// preparation of its own).
json default_redraw(const json& loaded, const Protocol& protocol) {
  json names = json::array();
  if (!protocol.redraw_parameters) return names;
  for (const auto& [name, info] : loaded["state_spec"].items()) names.push_back(name);
  return names;
}

// One call per draw, then one for the timing inputs: each call holds the device's gate
// (shared) only for its own part, so a timing run of another evaluation waits for one draw,
// not the whole set (at KernelBench's sizes, 15-19 s in one call on the H200; about 1 s a draw).
json draw_cases_of(const ReferenceSession& session, const Protocol& protocol, const json& redraw,
                   const fs::path& problem, const ReferenceCall& call) {
  json prepared = {{"cases", json::array()}, {"notes", json::array()}};
  for (const auto& f : protocol.families) {
    for (int draw = 0; draw < f.draws; ++draw) {
      auto response = call({{"cmd", "prepare_family"},
                            {"secret", session.secret},
                            {"family", {{"name", f.name}, {"draws", 1}, {"first", draw}}},
                            {"redraw", redraw},
                            {"directory", session.run_dir.string()}});
      require_reference_answer(response, problem, "drawing the input families");
      for (auto& c : response.result["cases"]) prepared["cases"].push_back(std::move(c));
      for (auto& n : response.result["notes"]) prepared["notes"].push_back(std::move(n));
    }
  }
  auto timing = call({{"cmd", "prepare_timing_sets"},
                      {"cases", prepared["cases"]},
                      {"directory", session.run_dir.string()},
                      {"timing_families", protocol.timing_families}});
  require_reference_answer(timing, problem, "preparing the timing inputs");
  prepared["timing_inputs"] = timing.result["timing_inputs"];
  prepared["timing_golden"] = timing.result["timing_golden"];
  return prepared;
}

// The session's cases, (re)drawn for `redraw`: the previous set on disk is overwritten, and its
// audit no longer holds.
void draw_session_cases(ReferenceSession& session, const Protocol& protocol, const json& redraw,
                        const fs::path& problem, const ReferenceCall& call) {
  session.prepared = draw_cases_of(session, protocol, redraw, problem, call);
  session.prepared_redraw = redraw;
  session.audit.reset();
  ++session.preparations;
}

}  // namespace

CandidateWorker::~CandidateWorker() {
  if (process) process->stop();
  if (!keep_folder && !folder.empty()) {
    std::error_code ec;
    fs::remove_all(folder, ec);
  }
}

// What a reference session for this request must match, apart from the software and the secret
// (those belong to the session itself).
ReferenceKey requested_key(const EvalRequest& request) {
  const Protocol protocol = protocol_by_name(request.protocol, request.hidden_draws);
  ReferenceKey key;
  key.problem_sha256 = sha256_file(request.problem);
  key.device = request.device;
  key.protocol = protocol.name;
  key.protocol_version = protocol.version;
  key.draws = request.hidden_draws;
  key.size = request.size;
  key.kbv_version = std::string(kVersion);
  return key;
}

// A new session: its own run directory and secret seed; no worker yet.
std::unique_ptr<ReferenceSession> new_reference_session(const EvalRequest& request,
                                                        const ReferenceKey& key) {
  auto fresh = std::make_unique<ReferenceSession>();
  fresh->key = key;
  fresh->problem = fs::absolute(request.problem);
  fresh->keep_run_dir = request.keep_work_dir;
  fresh->run_dir = make_run_dir(request.work_dir);
  fresh->secret = random_secret();
  fresh->key.secret_sha256 = sha256_hex(fresh->secret);
  return fresh;
}

std::unique_ptr<WorkerProcess> start_reference_worker(const EvalRequest& request,
                                                      const fs::path& run_dir) {
  orchestrate::WorkerOptions options;
  options.role = "reference";
  options.python = orchestrate::locate_python();
  options.pythonpath = orchestrate::locate_pythonpath();
  options.working_directory = run_dir;
  options.log_file = run_dir / "reference.log";
  options.environment = worker_environment(request);
  options.sandbox.enabled = request.sandbox;
  // The problem is user code too, but trusted to write its run's golden outputs: no network,
  // no read-only file system.
  options.sandbox.read_only_root = false;
  return std::make_unique<WorkerProcess>(options);
}

std::unique_ptr<ReferenceSession> start_reference_session(const EvalRequest& request) {
  auto session = new_reference_session(request, requested_key(request));
  session->worker = start_reference_worker(request, session->run_dir);
  // The problem is loaded and its cases drawn on a thread of the session's own, each call under
  // the device's gate like any evaluation's (a timing run on the device excludes them); the
  // evaluation that takes the session joins it first. A failure leaves the session unused: the
  // evaluation starts a new one and reports the failure itself.
  session->preparing = std::thread([s = session.get(), request] {
    try {
      const Protocol protocol = protocol_by_name(request.protocol, request.hidden_draws);
      auto call = [&](const json& message) {
        DeviceGate::Hold hold;
        if (request.gate) hold = request.gate->shared();
        return s->worker->call(message, reference_timeout_of(request));
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

std::shared_ptr<CandidateWorker> start_candidate_worker(const EvalRequest& request) {
  auto worker = std::make_shared<CandidateWorker>();
  worker->candidate = fs::absolute(request.candidate);
  worker->keep_folder = request.keep_work_dir;
  worker->folder =
      make_private_dir(request.work_dir, "kbv-cand", {"inputs", "state", "candidate", "scratch"});
  const fs::path& dir = worker->folder;
  fs::path cache = extension_cache_dir(request.cache_dir, request.candidate, request.device);
  fs::create_directories(cache);
  orchestrate::WorkerOptions options;
  options.role = "candidate";
  options.python = orchestrate::locate_python();
  options.pythonpath = orchestrate::locate_pythonpath();
  options.working_directory = dir / "scratch";
  options.log_file = dir / "candidate.log";
  options.environment = worker_environment(request);
  options.environment["TORCH_EXTENSIONS_DIR"] = cache.string();
  for (const char* var : {"TMPDIR", "XDG_CACHE_HOME", "TRITON_CACHE_DIR"}) {
    options.environment[var] = (dir / "scratch").string();
  }
  // The candidate sees its inputs, parameters and its own file, never golden outputs, the
  // reference's log or other runs; it writes only its outputs, scratch and build cache.
  auto& box = options.sandbox;
  box.enabled = request.sandbox;
  box.private_root = dir.parent_path();
  box.exposed = {dir / "inputs", dir / "state", worker->candidate};
  box.writable = {dir / "candidate", dir / "scratch", cache};
  box.max_cpu_seconds = 3600 + static_cast<unsigned long long>(request.compile_timeout.count());
  box.max_new_processes = 512;
  box.quota_dir = dir / "scratch";
  box.quota_bytes = request.max_scratch_bytes;
  if (!request.device.starts_with("cuda")) {
    // Host memory cap on the CPU path (CUDA maps large private regions of its own).
    box.max_data_bytes = request.max_host_memory_bytes;
  }
  worker->process = std::make_unique<WorkerProcess>(options);
  return worker;
}

class Evaluation {
 public:
  explicit Evaluation(const EvalRequest& request)
      : request_(request), protocol_(protocol_by_name(request.protocol, request.hidden_draws)) {}

  Result run() {
    auto started = Clock::now();
    result_.protocol = protocol_.to_json();
    result_.candidate = {{"path", fs::absolute(request_.candidate).string()}};
    try {
      stages();
      check_run_dir();
    } catch (...) {
      cleanup(true);
      throw;
    }
    if (session_) result_.problem["reference"] = session_->record(reused_);
    if (reference_started_ahead_) {
      result_.problem["reference"]["started_ahead"] = true;
      result_.problem["reference"]["prepared_ahead"] = session_->prepared_ahead;
      result_.problem["reference"]["ahead_wait_s"] = ahead_wait_s_;
    }
    double total = seconds_since(started);
    double gate_wait = 0;
    for (const auto& [stage, seconds] : gate_wait_by_stage_) gate_wait += seconds;
    result_.durations_s["total"] = total;
    result_.durations_s["split"] = {
        {"compile", compile_s_},
        {"reference", reference_s_},
        {"candidate", candidate_s_},
        {"gate_wait", gate_wait},
        {"idle", std::max(0.0, total - compile_s_ - reference_s_ - candidate_s_ - gate_wait)}};
    if (!gate_wait_by_stage_.empty())
      result_.durations_s["gate_wait_by_stage"] = gate_wait_by_stage_;
    decide_verdict(result_, failure_);
    cleanup(false);
    return result_;
  }

 private:
  void progress(const std::string& line) {
    if (request_.progress) request_.progress(line);
  }

  void stages() {
    if (!fs::is_regular_file(request_.problem)) {
      throw UsageError(fmt::format("problem file {} does not exist", request_.problem.string()));
    }
    if (!fs::is_regular_file(request_.candidate)) {
      throw UsageError(
          fmt::format("candidate file {} does not exist", request_.candidate.string()));
    }
    reused_ = acquire_reference();
    // Both workers start (and import torch) side by side.
    take_candidate_worker();
    if (session_->loaded.is_null()) load_problem();  // else reused or loaded ahead
    json problem = describe_problem();
    cand_->send(in_candidate_view({{"cmd", "load_candidate"},
                                   {"candidate", fs::absolute(request_.candidate).string()},
                                   {"device", request_.device},
                                   {"init_inputs_path", init_inputs_path().string()}}));
    // The reference draws every case while the candidate builds (once per problem and key).
    auto t = Clock::now();
    stage_ = "reference";
    progress("drawing input families and golden outputs");
    json prepared = prepare(default_redraw(problem, protocol_));
    result_.durations_s["reference"] = seconds_since(t) + ahead_wait_s_;
    reference_s_ += ahead_wait_s_;

    t = Clock::now();
    stage_ = "candidate_load";
    progress("building and loading the candidate");
    Response loaded = cand_->receive(request_.compile_timeout);
    result_.durations_s["candidate_load"] = seconds_since(t);
    compile_s_ = result_.durations_s["candidate_load"];
    if (!loaded.ok()) return fail_load(loaded);
    result_.candidate["import_seconds"] = loaded.result.value("import_seconds", 0.0);
    note_numerics(loaded.result);
    note_harness(loaded.result, "importing and constructing the candidate");
    scan_candidate();

    auto match = match_state(problem["state_spec"], loaded.result["state_spec"]);
    if (!match.unmatched_reference.empty()) {
      std::string names;
      for (const auto& n : match.unmatched_reference) names += (names.empty() ? "" : ", ") + n;
      result_.add_flag("params_unmatched", Severity::Warn,
                       fmt::format("reference state {} has no same-name, same-shape counterpart "
                                   "in ModelNew; left at its seeded initial values (not "
                                   "re-drawn) so both sides can still agree",
                                   names));
      if (protocol_.redraw_parameters) {
        json matched = json::array();
        for (const auto& [ref, cand] : match.mapping) matched.push_back(ref);
        prepared = prepare(matched);
      }
    }
    if (!match.renamed.empty()) {
      result_.add_flag("params_matched_by_shape", Severity::Info,
                       fmt::format("matched by unique shape: {}", json(match.renamed).dump()));
    }
    cand_call({{"cmd", "set_mapping"}, {"mapping", match.mapping}}, request_.call_timeout);
    snapshot_run_dir();

    t = Clock::now();
    stage_ = "correctness";
    if (!check_cases(prepared["cases"])) {
      result_.durations_s["correctness"] = seconds_since(t);
      return;
    }
    result_.durations_s["correctness"] = seconds_since(t);
    audit(prepared["cases"]);
    bool all_correct = true;
    for (const auto& f : result_.correctness) all_correct = all_correct && f.ok();
    // The re-checks only run on a candidate that passed every case: what they catch (caches,
    // nondeterminism, library calls, ghost kernels) matters only for one that would be correct.
    if (all_correct && !result_.has_reject_flag()) {
      t = Clock::now();
      stage_ = "rechecks";
      if (!post_checks(prepared["cases"])) {
        result_.durations_s["rechecks"] = seconds_since(t);
        return;
      }
      result_.durations_s["rechecks"] = seconds_since(t);
    }
    // The operator trace comes before timing: a forward that leaves the main computation to
    // PyTorch is rejected without being timed (9 of 35 timed results in the H200 suite run).
    if (trace_case_ && !failure_) {
      t = Clock::now();
      stage_ = "trace";
      trace_operators(*trace_case_);
      result_.durations_s["trace"] = seconds_since(t);
    }
    if (all_correct && !result_.has_reject_flag() && !failure_ && request_.measure) {
      t = Clock::now();
      stage_ = "measurement";
      measure(prepared);
      result_.durations_s["measurement"] = seconds_since(t);
    }
    // The kernel trace comes last. It records through kbv_native's CUPTI tracer, but falls back
    // to torch.profiler where that tracer is unavailable, and torch.profiler (kineto) keeps
    // CUPTI's only subscriber slot for the rest of the worker's life, which the measurement's
    // kernel audit and memory tracer need (on the H200 they reported
    // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED while a torch.profiler trace ran first).
    // Also for a candidate the operator trace rejected: the kernel trace may clear its
    // kernel_never_called (a CUDA graph replaying the candidate's own kernels).
    if (operator_trace_ && !failure_) {
      t = Clock::now();
      stage_ = "trace";
      trace_kernels(*trace_case_);
      result_.durations_s["trace"] = result_.durations_s.value("trace", 0.0) + seconds_since(t);
    }
  }

  // -- workers ---------------------------------------------------------------------------------

  // The reference side: the slot's session when its key still holds (same problem content and
  // path, device, protocol, draws, size, kbv), else a new one: a new run directory, secret and
  // reference worker. Returns whether the session was reused.
  bool acquire_reference() {
    ReferenceKey want = requested_key(request_);
    const fs::path problem = fs::absolute(request_.problem);
    auto* slot = request_.reference;
    if (slot && slot->session && slot->session->key.same_request(want) &&
        slot->session->problem == problem && slot->session->worker &&
        slot->session->worker->call({{"cmd", "ping"}}, std::chrono::seconds(30)).ok()) {
      session_ = slot->session.get();
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
        ahead_wait_s_ = seconds_since(t);
        if (ahead && ahead->ahead_error.empty() && ahead->key.same_request(want) && ahead->worker &&
            !ahead->worker->ready(std::chrono::milliseconds(0))) {
          fresh = std::move(ahead);
          reference_started_ahead_ = true;
        }
      }
      if (!fresh) fresh = new_reference_session(request_, want);
      session_ = fresh.get();
      if (slot) {
        slot->session = std::move(fresh);
        ++slot->sessions_started;
      } else {
        own_session_ = std::move(fresh);
      }
    }
    run_dir_ = session_->run_dir;
    secret_ = session_->secret;
    ++session_->candidates;
    if (!session_->worker) session_->worker = start_reference_worker(request_, run_dir_);
    return session_->candidates > 1;  // an earlier candidate used it
  }

  Response ref_call(const json& request, std::chrono::milliseconds timeout) {
    auto hold = enter_gate(false);
    auto t = Clock::now();
    auto response = session_->worker->call(request, timeout);
    reference_s_ += seconds_since(t);
    return response;
  }

  // ref_call with the reference's timeout, for the load and draw helpers shared with the
  // sessions prepared ahead.
  ReferenceCall reference_call() {
    return [this](const json& m) { return ref_call(m, reference_timeout()); };
  }

  Response cand_call(const json& request, std::chrono::milliseconds timeout) {
    auto hold = enter_gate(false);
    auto t = Clock::now();
    auto response = cand_->call(in_candidate_view(request), timeout);
    candidate_s_ += seconds_since(t);
    return response;
  }

  // The device's gate (several evaluations on one device): shared for one exchange, exclusive
  // for the timing run. The wait is this evaluation's, counted apart from its work.
  DeviceGate::Hold enter_gate(bool exclusive) {
    if (!request_.gate) return {};
    auto t = Clock::now();
    auto hold = exclusive ? request_.gate->exclusive() : request_.gate->shared();
    gate_wait_by_stage_[stage_] += seconds_since(t);
    return hold;
  }

  fs::path init_inputs_path() const { return init_inputs_file(run_dir_); }

  // The worker started ahead for this candidate when there is one still waiting (it has said
  // nothing since its start), else a new one.
  void take_candidate_worker() {
    auto& ahead = request_.prestarted;
    if (ahead && ahead->process && ahead->candidate == fs::absolute(request_.candidate) &&
        !ahead->process->ready(std::chrono::milliseconds(0))) {
      cand_worker_ = ahead;
      result_.candidate["worker_started_ahead"] = true;
    } else {
      cand_worker_ = start_candidate_worker(request_);
    }
    cand_dir_ = cand_worker_->folder;
    cand_ = cand_worker_->process.get();
    result_.isolation = cand_->isolation();
  }

  // The candidate reads the reference's inputs and states through its own folder: mirrored
  // when the reference has written new ones (a first or new preparation) since the last time.
  void mirror_reference_files() {
    for (const char* sub : {"inputs", "state"}) mirror_files(run_dir_ / sub, cand_dir_ / sub);
    mirrored_preparations_ = session_->preparations;
  }

  // A candidate request's paths into the run folder, as the candidate sees them.
  json in_candidate_view(const json& request) {
    if (mirrored_preparations_ != session_->preparations) mirror_reference_files();
    return rebase_paths(request, run_dir_.string(), cand_dir_.string());
  }

  void load_problem() {
    progress("loading the problem");
    load_problem_into(*session_, request_, reference_call());
  }

  json describe_problem() {
    const auto& r = session_->loaded;
    result_.problem = {{"name", r["name"]},
                       {"path", fs::absolute(request_.problem).string()},
                       {"sha256", session_->key.problem_sha256},
                       {"size", request_.size},
                       {"inputs", r["inputs"]},
                       {"degenerate", false}};
    result_.candidate["sha256"] = sha256_file(request_.candidate);
    result_.environment = r["environment"];
    result_.environment["kbv_version"] = std::string(kVersion);
    result_.environment["protocol"] = protocol_.name;
    result_.environment["protocol_version"] = protocol_.version;
    result_.environment["seed_sha256"] = sha256_hex(secret_);
    result_.problem["reference_persistent_bytes"] = r["persistent_bytes"];
    return r;
  }

  // The cases drawn for `redraw` (the parameter names re-drawn): the session's own when they
  // were drawn for the same names, else drawn now (overwriting the previous set on disk).
  json prepare(const json& redraw) {
    if (session_->preparations == 0 || session_->prepared_redraw != redraw) {
      draw_session_cases(*session_, protocol_, redraw, request_.problem, reference_call());
    }
    for (const auto& note : session_->prepared["notes"]) {
      result_.add_flag("family_replaced", Severity::Info, note.value("detail", ""));
    }
    return session_->prepared;
  }

  std::chrono::seconds reference_timeout() const { return reference_timeout_of(request_); }

  void require_reference(const Response& response, const std::string& stage) {
    require_reference_answer(response, request_.problem, stage);
  }

  // -- failures of the candidate ---------------------------------------------------------------
  void fail_load(const Response& r) {
    if (r.status == Response::Status::Timeout) {
      failure_ = StageFailure{Verdict::Timeout,
                              fmt::format("building and importing the candidate did not finish "
                                          "within {} s",
                                          request_.compile_timeout.count())};
    } else if (r.status == Response::Status::Died) {
      failure_ = StageFailure{Verdict::RuntimeError,
                              "the candidate's process died while importing: " + r.message};
    } else if (r.error_kind == "compile_error") {
      failure_ = StageFailure{Verdict::CompileError, first_line(r.message)};
    } else {
      failure_ = StageFailure{Verdict::RuntimeError, first_line(r.message)};
    }
    result_.error_detail = r.detail.empty() ? r.message : r.message + "\n" + r.detail;
  }

  void fail_call(const Response& r, const std::string& during) {
    if (r.status == Response::Status::Timeout) {
      failure_ = StageFailure{Verdict::Timeout, fmt::format("the candidate {} during {}: it was "
                                                            "killed",
                                                            r.message, during)};
    } else if (r.status == Response::Status::Died) {
      failure_ =
          StageFailure{Verdict::RuntimeError, fmt::format("{} during {}", r.message, during)};
    } else {
      failure_ = StageFailure{Verdict::RuntimeError,
                              fmt::format("{} ({})", first_line(r.message), during)};
    }
    result_.error_detail = r.detail;
  }

  // Any change of a global numerics flag is a warning (it is put back after every call). A
  // precision flag lowered below the baseline's TF32 (bf16 matmul precision, reduced-precision
  // reductions, a half default dtype) again after being put back, i.e. one the forward itself
  // keeps lowering, is a reject: it changes the candidate's own arithmetic behind the
  // tolerance policy (E3). Raising precision (IEEE, "highest") is only ever a warning.
  void note_numerics(const json& response) {
    if (!response.contains("numerics_changed") || response["numerics_changed"].empty()) return;
    const auto& changed = response["numerics_changed"];
    result_.add_flag("numerics_flags_changed", Severity::Warn,
                     "the candidate changed global numerics settings (put back before any "
                     "measurement): " +
                         changed.dump());
    bool lowered = false;
    for (const auto& [key, values] : changed.items()) {
      if (!values.is_array() || values.size() != 2) continue;
      const auto& now = values[1];
      if (key == "float32_matmul_precision") lowered |= now == "medium";
      if (key == "matmul_fp32_precision" || key == "cudnn_conv_fp32_precision") {
        lowered |= now == "bf16";
      }
      if (key == "matmul_allow_fp16_reduced_precision" ||
          key == "matmul_allow_bf16_reduced_precision") {
        lowered |= now == true;
      }
      if (key == "default_dtype") lowered |= now == "torch.float16" || now == "torch.bfloat16";
    }
    if (lowered && ++precision_lowerings_ >= 2) {
      result_.add_flag("precision_flags_changed", Severity::Reject,
                       "the candidate's forward keeps lowering precision flags (they were put "
                       "back after each call and lowered again): " +
                           changed.dump());
    }
  }

  // T4: timing or harness entry points replaced (they are put back by the worker).
  void note_harness(const json& response, const std::string& during) {
    if (response.contains("harness_tampered") && !response["harness_tampered"].empty()) {
      result_.add_flag("harness_tampered", Severity::Reject,
                       fmt::format("timing or harness functions were replaced while {}: {}", during,
                                   response["harness_tampered"].dump()));
    }
  }

  // T2: a thread left running by the forward, and outputs that changed after it returned.
  void note_watch(const json& response, const std::string& case_id) {
    if (!response.contains("watch")) return;
    const auto& w = response["watch"];
    bool changed = !w["outputs_changed_after_return"].empty();
    if (changed) {
      result_.add_flag(
          "output_changed_after_return", Severity::Reject,
          fmt::format("output {} changed after the forward returned on {} (work finished "
                      "later, outside any timed region)",
                      w["outputs_changed_after_return"].dump(), case_id));
    }
    if (!w["threads_left_running"].empty()) {
      std::string detail = fmt::format(
          "the forward returned with thread(s) {} still running on {}{}",
          w["threads_left_running"].dump(), case_id,
          changed ? "; the output changed after they finished" : "; the output did not change");
      upgrade_or_add("background_thread", changed ? Severity::Reject : Severity::Warn, detail);
    }
  }

  void upgrade_or_add(const std::string& id, Severity severity, const std::string& detail) {
    for (auto& f : result_.flags) {
      if (f.id == id) {
        if (severity == Severity::Reject && f.severity != Severity::Reject) {
          f.severity = Severity::Reject;
          f.detail = detail;
        }
        return;
      }
    }
    result_.add_flag(id, severity, detail);
  }

  // What the worker reports the candidate changed around a call (numerics flags, harness entry
  // points, persisting L2); each part is a no-op when the response does not carry it.
  void note_call_state(const json& response, const std::string& during) {
    note_numerics(response);
    note_harness(response, during);
    note_l2(response, during);
  }

  void note_candidate_call(const json& response, const std::string& case_id) {
    note_call_state(response, "running the forward on " + case_id);
    note_watch(response, case_id);
  }

  // T7: a persisting-L2 set-aside or access-policy window the candidate left set. The worker
  // puts it back after every call and the timer before every sample, so it cannot pay off.
  void note_l2(const json& response, const std::string& during) {
    if (!response.contains("l2_persisting") || response["l2_persisting"].empty()) return;
    result_.add_flag("l2_persisting_changed", Severity::Warn,
                     fmt::format("the candidate set persisting L2 while {} (reset after every "
                                 "call and before every timed sample): {}",
                                 during, response["l2_persisting"].dump()));
  }

  // Static scan of the candidate's source by the (trusted) reference worker: evidence only.
  void scan_candidate() {
    auto response = ref_call({{"cmd", "scan"}, {"candidate", fs::absolute(request_.candidate)}},
                             reference_timeout());
    if (!response.ok()) return;
    result_.candidate["scan"] = response.result;
    for (const auto& [id, finding] : response.result["findings"].items()) {
      auto severity = finding.value("severity", "info") == "warn" ? Severity::Warn : Severity::Info;
      std::string evidence;
      for (const auto& e : finding["evidence"]) {
        evidence += (evidence.empty() ? "" : "; ") + e.get<std::string>();
      }
      result_.add_flag(id, severity,
                       fmt::format("static scan: {} ({})", finding.value("meaning", ""), evidence));
    }
  }

  // -- correctness -----------------------------------------------------------------------------
  FamilyResult& family(const std::string& name, int draws) {
    for (auto& f : result_.correctness) {
      if (f.family == name) return f;
    }
    FamilyResult f;
    f.family = name;
    f.draws = draws;
    result_.correctness.push_back(f);
    return result_.correctness.back();
  }

  bool check_cases(const json& cases) {
    for (const auto& spec : protocol_.families) family(spec.name, spec.draws);
    int index = 0;
    for (const auto& c : cases) {
      ++index;
      progress(fmt::format("checking {} ({}/{})", c["id"].get<std::string>(), index, cases.size()));
      auto output = cand_dir_ / "candidate" / (c["id"].get<std::string>() + ".safetensors");
      auto response = cand_call({{"cmd", "run_case"},
                                 {"inputs", c["inputs"]},
                                 {"state", c["state"]},
                                 {"output", output.string()},
                                 {"max_output_bytes", output_limit({&c})}},
                                request_.call_timeout);
      auto& fam = family(c["family"], 0);
      fam.evaluated = true;
      if (!response.ok()) {
        fail_call(response,
                  fmt::format("the forward on {} inputs", c["family"].get<std::string>()));
        return false;
      }
      note_candidate_call(response.result, c["id"].get<std::string>());
      json outcome = judge_case(c, response.result, output);
      bool passed = outcome["passed"];
      if (passed) fam.passed += 1;
      for (const auto& o : outcome["outputs"]) {
        fam.max_abs = std::max(fam.max_abs, o["candidate"].value("max_abs", 0.0));
        fam.max_rel = std::max(fam.max_rel, o["candidate"].value("max_rel", 0.0));
        fam.normwise_rel = std::max(fam.normwise_rel, o["candidate"].value("normwise_rel", 0.0));
      }
      fam.cases.push_back(outcome);
    }
    return true;
  }

  // Structure first (count, type, aliasing, input mutation), then every output's figures.
  json judge_case(const json& c, const json& run, const fs::path& output_file) {
    json outcome = {{"id", c["id"]}, {"draw", c["draw"]}, {"passed", false}};
    outcome["outputs"] = json::array();
    for (int index : run["inputs_mutated"]) {
      result_.add_flag("inputs_mutated", Severity::Reject,
                       fmt::format("the forward changed input {} in place on {}", index,
                                   c["id"].get<std::string>()));
    }
    if (!run["outputs_aliasing_inputs"].empty() && !c.value("reference_aliases_input", false)) {
      result_.add_flag(
          "output_aliases_input", Severity::Reject,
          fmt::format("output {} shares storage with an input on {}",
                      run["outputs_aliasing_inputs"].dump(), c["id"].get<std::string>()));
    }
    const auto& outs = run["outputs"];
    int expected = c["outputs"];
    if (run["structure"] != c["structure"] || static_cast<int>(outs.size()) != expected) {
      outcome["reason"] = fmt::format(
          "returned {} ({} value{}) where the reference returns {} ({} value{})",
          run["structure"] == "tensor" ? "a single value" : "a sequence", outs.size(),
          outs.size() == 1 ? "" : "s", c["structure"] == "tensor" ? "a tensor" : "a sequence",
          expected, expected == 1 ? "" : "s");
      return outcome;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].contains("dtype")) {
        outcome["reason"] =
            fmt::format("output {} is a {}, not a tensor", i, outs[i]["type"].get<std::string>());
        return outcome;
      }
      if (!outs[i].value("plain", false)) {
        result_.add_flag("output_not_plain_tensor", Severity::Reject,
                         fmt::format("output {} is a {}, a subclass of torch.Tensor that can "
                                     "defer or fake its values",
                                     i, outs[i]["type"].get<std::string>()));
      }
    }
    std::string unreadable;
    auto opened = open_output(output_file, unreadable);
    if (!opened) {
      outcome["reason"] = unreadable;
      return outcome;
    }
    const auto& candidate = *opened;
    auto golden = tensor::SafetensorsFile::open(c["golden"].get<std::string>());
    bool all = true;
    std::string reason;
    for (size_t i = 0; i < outs.size(); ++i) {
      const auto* cand = candidate.find(fmt::format("candidate.out{}", i));
      const auto* ref = golden.find(fmt::format("{}.out{}", protocol_.reference_variant, i));
      const auto* truth = golden.find(fmt::format("truth.out{}", i));
      if (!cand || !ref || !truth) throw std::runtime_error("a case file lacks an output");
      auto verdict = check::compare(*cand, *ref, *truth, protocol_.policy);
      json o = verdict.to_json();
      o["index"] = i;
      outcome["outputs"].push_back(o);
      if (!verdict.passed && all) {
        all = false;
        reason = outs.size() > 1 ? fmt::format("output {}: {}", i, verdict.reason) : verdict.reason;
      }
    }
    outcome["passed"] = all;
    outcome["truth"] = c["truth"];
    if (!all) outcome["reason"] = reason;
    return outcome;
  }

  // The most output a candidate may return for these cases: twice the golden file (which holds
  // the TF32, FP32 and float64 outputs), at least 64 MiB. Larger returns are refused by the
  // worker before any copy, so a multi-GB output costs only its own result.
  static unsigned long long output_limit(const std::vector<const json*>& cases) {
    unsigned long long largest = 0;
    std::error_code ec;
    for (const auto* c : cases) {
      if (!c) continue;
      auto size = fs::file_size((*c)["golden"].get<std::string>(), ec);
      if (!ec) largest = std::max<unsigned long long>(largest, size);
    }
    return std::max(64ULL << 20, 2 * largest);
  }

  // A candidate's output file, read here, outside its sandbox. Its worker wrote a valid file,
  // but the candidate's own threads may rewrite it or swap it for a link meanwhile: a link is
  // not followed, and a file that no longer reads is the candidate's doing (a reject), never a
  // crash of kbv. nullopt, with `why`, when it cannot be read.
  std::optional<tensor::SafetensorsFile> open_output(const fs::path& file, std::string& why) {
    try {
      return tensor::SafetensorsFile::open(file, /*follow_links=*/false);
    } catch (const std::exception& error) {
      // The message may quote the file's bytes: only printable ASCII of it is kept.
      std::string detail = error.what();
      for (char& ch : detail) {
        if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e)
          ch = '?';
      }
      why = fmt::format("the output file {} no longer reads as kbv's worker wrote it: {}",
                        file.filename().string(), detail);
      result_.add_flag("output_file_tampered", Severity::Reject, why);
      return std::nullopt;
    }
  }

  // Every output of a candidate file against a case's golden outputs: passed, and why not.
  std::pair<bool, std::string> matches_golden(const json& c, const fs::path& output_file) {
    if (!fs::exists(fs::symlink_status(output_file))) return {false, "no output was saved"};
    std::string unreadable;
    auto opened = open_output(output_file, unreadable);
    if (!opened) return {false, unreadable};
    const auto& candidate = *opened;
    auto golden = tensor::SafetensorsFile::open(c["golden"].get<std::string>());
    int expected = c["outputs"];
    for (int i = 0; i < expected; ++i) {
      const auto* cand = candidate.find(fmt::format("candidate.out{}", i));
      const auto* ref = golden.find(fmt::format("{}.out{}", protocol_.reference_variant, i));
      const auto* truth = golden.find(fmt::format("truth.out{}", i));
      if (!cand || !ref || !truth) return {false, fmt::format("output {} is missing", i)};
      auto verdict = check::compare(*cand, *ref, *truth, protocol_.policy);
      if (!verdict.passed) return {false, verdict.reason};
    }
    return {true, ""};
  }

  bool same_bytes(const fs::path& a, const fs::path& b) {
    std::string unreadable;
    auto opened_a = open_output(a, unreadable);
    auto opened_b = open_output(b, unreadable);
    if (!opened_a || !opened_b) return false;
    const auto& fa = *opened_a;
    const auto& fb = *opened_b;
    if (fa.tensors().size() != fb.tensors().size()) return false;
    for (size_t i = 0; i < fa.tensors().size(); ++i) {
      const auto& x = fa.tensors()[i];
      const auto& y = fb.tensors()[i];
      if (x.nbytes != y.nbytes || std::memcmp(x.data, y.data, x.nbytes) != 0) return false;
    }
    return true;
  }

  // Re-checks of a candidate that passed every case (S5, S2, B1, B2):
  //  1. determinism: case A again on fresh buffers; it must pass again (bitwise differences
  //     within the budget are fine: atomics);
  //  2. fresh values in reused buffers: case B's values written into the very tensor objects
  //     of run 1 (same addresses, same `_version`), with B's state; must match B's golden;
  //  3. reused values in fresh buffers: case A's values in new tensors; must match A's golden;
  //  4. the operator trace of one forward against the reference's own trace.
  // The candidate only writes outputs; the golden outputs never leave this process's view.
  bool post_checks(const json& cases) {
    if (cases.empty()) return true;
    progress("re-checking: determinism, caching, operator trace");
    const json& a = cases[0];
    const json& b = cases.size() > 1 ? cases[1] : cases[0];
    auto run = [&](const json& c, const std::string& tag, json extra) -> std::optional<fs::path> {
      auto output =
          cand_dir_ / "candidate" / (c["id"].get<std::string>() + "-" + tag + ".safetensors");
      json request = {{"cmd", "run_case"},
                      {"inputs", c["inputs"]},
                      {"state", c["state"]},
                      {"output", output.string()},
                      {"max_output_bytes", output_limit({&c})}};
      request.update(extra);
      auto response = cand_call(request, request_.call_timeout);
      if (!response.ok()) {
        fail_call(response, fmt::format("a re-check ({}) on {}", tag, c["id"].get<std::string>()));
        return std::nullopt;
      }
      note_candidate_call(response.result, c["id"].get<std::string>() + " (" + tag + ")");
      for (int index : response.result["inputs_mutated"]) {
        result_.add_flag("inputs_mutated", Severity::Reject,
                         fmt::format("the forward changed input {} in place on a re-check", index));
      }
      return output;
    };
    json rechecks = json::object();

    auto repeat = run(a, "repeat", {{"keep", "recheck"}});
    if (!repeat) return false;
    auto [repeat_ok, repeat_why] = matches_golden(a, *repeat);
    auto first = cand_dir_ / "candidate" / (a["id"].get<std::string>() + ".safetensors");
    bool bitwise = fs::exists(first) && same_bytes(first, *repeat);
    rechecks["determinism"] = {
        {"case", a["id"]}, {"passed", repeat_ok}, {"bitwise_equal", bitwise}};
    if (!repeat_ok) {
      result_.add_flag("nondeterministic", Severity::Reject,
                       fmt::format("{} passed once and failed when run again: {}",
                                   a["id"].get<std::string>(), repeat_why));
    }

    auto reused = run(b, "same-buffers", {{"reuse", "recheck"}});
    if (!reused) return false;
    auto [reused_ok, reused_why] = matches_golden(b, *reused);
    rechecks["fresh_values_in_reused_buffers"] = {{"case", b["id"]}, {"passed", reused_ok}};
    if (!reused_ok) {
      result_.add_flag(
          "output_cached", Severity::Reject,
          fmt::format("with {}'s values written into the same input tensors (same "
                      "addresses and versions) the output is wrong: {}; the plain "
                      "check of {} passed",
                      b["id"].get<std::string>(), reused_why, b["id"].get<std::string>()));
    }

    auto fresh = run(a, "fresh-buffers", json::object());
    if (!fresh) return false;
    auto [fresh_ok, fresh_why] = matches_golden(a, *fresh);
    rechecks["reused_values_in_fresh_buffers"] = {{"case", a["id"]}, {"passed", fresh_ok}};
    if (!fresh_ok) {
      result_.add_flag("output_cached", Severity::Reject,
                       fmt::format("{}'s values in new input tensors give a wrong output: {}",
                                   a["id"].get<std::string>(), fresh_why));
    }
    result_.candidate["rechecks"] = rechecks;
    trace_case_ = b;
    return true;
  }

  // B1/B2: which operators the forward dispatched and whether the candidate's extension ran,
  // from the dispatcher (no CUPTI). A verified-protocol reject for library_main_op is decided
  // here; kernel_never_called waits for the kernel trace, which may clear it (a CUDA graph
  // replays the candidate's own kernels without calling its extension).
  void trace_operators(const json& c) {
    auto cand = cand_call(trace_request(c, "ops"), request_.call_timeout);
    if (!cand.ok()) return fail_call(cand, "tracing the forward's operators");
    note_call_state(cand.result, "tracing the forward");
    auto ref = ref_call({{"cmd", "trace"}, {"inputs", c["inputs"]}, {"state", c["state"]}},
                        reference_timeout());
    require_reference(ref, "tracing the reference's operators");
    operator_trace_ = assess_trace(ref.result, cand.result);
    result_.candidate["trace"] = operator_trace_->record;
    for (const auto& flag : operator_trace_->flags) {
      if (flag.id == "library_main_op") add_trace_flag(flag);
    }
  }

  // T1, B1, B2 on the GPU, then the operator trace's remaining findings.
  void trace_kernels(const json& c) {
    std::vector<Flag> flags;
    for (const auto& flag : operator_trace_->flags) {
      if (flag.id != "library_main_op") flags.push_back(flag);
    }
    json& record = operator_trace_->record;
    // Also on the CPU, where the answer is "not a CUDA device": the same path either way.
    auto cand = cand_call(trace_request(c, "gpu"), request_.call_timeout);
    if (!cand.ok()) return fail_call(cand, "tracing the forward's kernels");
    note_call_state(cand.result, "tracing the forward's kernels");
    if (cand.result.contains("gpu")) add_gpu_trace(cand.result["gpu"], record, flags);
    result_.candidate["trace"] = record;
    for (const auto& flag : flags) add_trace_flag(flag);
  }

  // The candidate's `trace` command on case `c`, for one part: "ops" or "gpu".
  static json trace_request(const json& c, const char* part) {
    return {{"cmd", "trace"},
            {"inputs", c["inputs"]},
            {"state", c["state"]},
            {"parts", json::array({part})}};
  }

  // The published protocols (standard, kbv-paper) accept library calls: there the trace's
  // findings about them are warnings, so those protocols reproduce published verdicts.
  void add_trace_flag(const Flag& flag) {
    bool verified = protocol_.name == "verified";
    bool library = flag.id == "library_main_op" || flag.id == "kernel_never_called";
    result_.add_flag(flag.id, verified || !library ? flag.severity : Severity::Warn, flag.detail);
  }

  // T1, B1, B2 on the GPU: the kernels one forward launched, with their streams. A candidate
  // whose own kernels ran (a CUDA graph replays them without calling the extension) is not a
  // ghost even when the extension-call count says so.
  void add_gpu_trace(const json& gpu, json& record, std::vector<Flag>& flags) {
    std::vector<std::string> own;
    if (result_.candidate.contains("scan")) {
      const json kernels = result_.candidate["scan"].value("kernels", json::array());
      for (const auto& k : kernels) own.push_back(k.get<std::string>());
    }
    int calls = 0;
    const json extension_calls = record.value("extension_calls", json::object());
    for (const auto& [name, count] : extension_calls.items()) calls += count.get<int>();
    calls = gpu.value("extension_calls", calls);  // counted in the traced forward itself
    bool heavy = !record.value("reference_heavy", json::array()).empty();
    auto assessed = assess_kernel_trace(gpu, own, heavy, calls);
    record["gpu"] = assessed.record;
    if (assessed.own_kernels_ran) {
      std::erase_if(flags, [](const Flag& f) { return f.id == "kernel_never_called"; });
    }
    flags.insert(flags.end(), assessed.flags.begin(), assessed.flags.end());
  }

  // The roofline floor: a median time below kRooflineSafety x what the reference's compulsory
  // bytes and FLOPs need at the device's peaks is skipped or escaped work, not a fast kernel.
  void check_roofline(bool cuda, const std::vector<double>& candidate) {
    if (!cuda || candidate.empty()) {
      result_.timing["roofline"] = {{"skipped", "no device peaks on the CPU"}};
      result_.add_flag("roofline_skipped", Severity::Info,
                       "the roofline floor is only checked on CUDA devices");
      return;
    }
    auto peaks = documented_peaks(result_.environment.value("device_name", ""));
    // The reference's cost (and measured peaks) do not depend on the candidate: counted once
    // per session.
    if (session_->roofline.is_null()) {
      auto r = ref_call({{"cmd", "roofline"}, {"measure_peaks", !peaks.has_value()}},
                        reference_timeout());
      if (!r.ok()) {
        result_.timing["roofline"] = {
            {"skipped", "the reference could not count its cost: " + first_line(r.message)}};
        return;
      }
      session_->roofline = r.result;
    }
    const json& c = session_->roofline;
    if (!peaks) {
      json m = c.value("measured_peaks", json::object());
      peaks = from_measured(m.value("copy_bytes_per_s", 0.0), m.value("matmul_flops_per_s", 0.0));
    }
    ReferenceCost cost{c.value("flops", 0.0),
                       c.value("input_bytes", 0.0) + c.value("state_bytes", 0.0),
                       c.value("output_bytes", 0.0), c.value("l2_bytes", 0.0)};
    auto check = assess_roofline(cost, *peaks, stats::summarize(candidate).median);
    json record = check.to_json();
    record["peaks"] = peaks->to_json();
    record["reference"] = c;
    result_.timing["roofline"] = record;
    if (check.below) {
      result_.add_flag(
          "below_roofline", Severity::Reject,
          fmt::format("median time {:.4f} ms is below {} x the roofline floor {:.4f} ms: {:.4g} "
                      "bytes at {:.3g} B/s = {:.4f} ms, {:.4g} FLOPs at {:.3g} FLOP/s = {:.4f} ms "
                      "({})",
                      check.candidate_ms, kRooflineSafety, check.floor_ms, check.bytes,
                      peaks->bytes_per_s, check.memory_ms, cost.flops, peaks->flops_per_s,
                      check.compute_ms, peaks->source));
    }
  }

  // The run directory's inputs and states, once written: the candidate may read them, never
  // change them (E2). Size and modification time of each file, and the top-level entries.
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> listing() const {
    std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(run_dir_, ec)) {
      out[entry.path().filename().string()] = {0, {}};
    }
    for (const char* sub : {"inputs", "state", "golden"}) {
      for (const auto& entry : fs::directory_iterator(run_dir_ / sub, ec)) {
        out[fmt::format("{}/{}", sub, entry.path().filename().string())] = {
            entry.file_size(ec), entry.last_write_time(ec)};
      }
    }
    out.erase("reference.log");
    out.erase("candidate.log");
    return out;
  }

  void snapshot_run_dir() { run_dir_listing_ = listing(); }

  void check_run_dir() {
    if (run_dir_listing_.empty()) return;
    auto now = listing();
    std::vector<std::string> changed;
    for (const auto& [name, info] : now) {
      auto it = run_dir_listing_.find(name);
      if (it == run_dir_listing_.end() || it->second != info) changed.push_back(name);
    }
    for (const auto& [name, info] : run_dir_listing_) {
      if (!now.contains(name)) changed.push_back(name);
    }
    if (!changed.empty()) {
      result_.add_flag("run_dir_tampered", Severity::Reject,
                       fmt::format("files of the run directory outside the candidate's scratch "
                                   "space were created or changed: {}",
                                   json(changed).dump()));
    }
  }

  void audit(const json& cases) {
    std::vector<AuditCase> audit_cases;
    for (const auto& c : cases) {
      audit_cases.push_back({c["id"], c["golden"].get<std::string>(), c.value("input_rms", 0.0)});
    }
    if (!session_->audit) session_->audit = audit_problem(audit_cases);
    const auto& audit = *session_->audit;
    result_.problem["degenerate"] = audit.degenerate;
    result_.problem["audit"] = audit.to_json();
    if (audit.degenerate) {
      result_.add_flag("problem_degenerate", Severity::Warn, audit.degenerate_why);
    }
    if (!audit.unstable.empty()) {
      result_.add_flag("reference_fails_float64", Severity::Warn,
                       fmt::format("the TF32 reference differs from its float64 run by more than "
                                   "{} on {}",
                                   kUnstable, json(audit.unstable).dump()));
    }
  }

  // -- timing and memory -----------------------------------------------------------------------
  void measure(const json& prepared) {
    bool cuda = request_.device.starts_with("cuda");
    auto response = cand_call({{"cmd", "prepare_timing"},
                               {"state", prepared["cases"][0]["state"]},
                               {"inputs", prepared["timing_inputs"]}},
                              request_.call_timeout);
    if (!response.ok()) return fail_call(response, "loading the timing inputs");

    // The last output of each timing set is saved by the candidate and judged against the
    // golden output of the case those inputs came from (T5, T6).
    std::vector<const json*> timing_cases;
    json timed_outputs = json::array();
    for (const auto& golden : prepared["timing_golden"]) {
      timing_cases.push_back(&golden);
      timed_outputs.push_back(
          (cand_dir_ / "candidate" / fmt::format("timed-{}.safetensors", timing_cases.size() - 1))
              .string());
    }
    // The loop itself (profiles, stopping rule, ABBA order, secondary figures) is
    // eval/measurement.cpp; this callback reaches the workers and judges what they return.
    auto call_side = [&](const std::string& who, const json& request) -> std::optional<json> {
      json sent = request;
      bool timed_call = request["cmd"] == "time";
      if (who != "cand") {
        sent["variant"] = who;
        Response timed = ref_call(sent, reference_timeout());
        require_reference(timed, "timing the baseline");
        return timed.result;
      }
      if (timed_call) {
        sent["outputs"] = timed_outputs;
        sent["max_output_bytes"] = output_limit(timing_cases);
      }
      Response timed = cand_call(sent, request_.call_timeout * 2);
      if (!timed.ok()) {
        fail_call(timed, "timing");
        return std::nullopt;
      }
      note_call_state(timed.result, "timing");
      for (int i : timed.result.value("saved_outputs", json::array())) {
        if (i < 0 || i >= static_cast<int>(timing_cases.size()) || !timing_cases[i]) continue;
        auto [ok, why] = matches_golden(*timing_cases[i], timed_outputs[i].get<std::string>());
        if (!ok) {
          result_.add_flag("timed_output_wrong", Severity::Reject,
                           fmt::format("the output of a timed call on {} is wrong ({}) "
                                       "although the same inputs passed when checked",
                                       (*timing_cases[i])["id"].get<std::string>(), why));
        }
      }
      if (timed.result.value("synchronizes_internally", false)) {
        result_.add_flag("forward_synchronizes", Severity::Info,
                         "the forward waits for the device before returning, so launch "
                         "latency could not be hidden; timed unblocked");
      }
      return timed.result;
    };
    auto plan =
        plan_timing(request_.timing_profile, request_.timing_samples, request_.timing_rounds, cuda);
    auto exclusive = enter_gate(true);  // nothing else runs on the device while this times
    auto started = Clock::now();
    auto timing = run_timing(plan, call_side, cuda, [&](const std::string& l) { progress(l); });
    result_.durations_s["timing"] = seconds_since(started);
    exclusive.release();
    if (!timing.ok) return;
    result_.timing = timing.timing;
    const auto& s = timing.samples;
    result_.speedup["vs_tf32"] = stats::speedup(s.at("tf32"), s.at("cand")).to_json();
    result_.speedup["vs_fp32"] = stats::speedup(s.at("fp32"), s.at("cand")).to_json();
    result_.speedup["headline"] = protocol_.headline == Headline::Tf32 ? "vs_tf32" : "vs_fp32";
    check_roofline(cuda, s.at("cand"));

    progress("measuring memory");
    started = Clock::now();
    auto cand_memory = cand_call({{"cmd", "memory"}}, request_.call_timeout);
    if (!cand_memory.ok()) return fail_call(cand_memory, "the memory measurement");
    note_harness(cand_memory.result, "measuring memory");
    // The baseline's memory does not depend on the candidate: measured once per session.
    if (session_->memory.is_null()) {
      auto ref_memory = ref_call({{"cmd", "memory"}}, reference_timeout());
      require_reference(ref_memory, "measuring the baseline's memory");
      session_->memory = ref_memory.result;
    }
    Response ref_memory;
    ref_memory.result = session_->memory;
    result_.durations_s["memory"] = seconds_since(started);
    double cand_peak = cand_memory.result.value("peak_bytes", 0.0);
    double ref_peak = ref_memory.result.value("peak_bytes", 0.0);
    result_.memory = {{"candidate_peak_bytes", cand_memory.result["peak_bytes"]},
                      {"reference_peak_bytes", ref_memory.result["peak_bytes"]},
                      {"peak_ratio", ref_peak > 0 ? json(cand_peak / ref_peak) : json(nullptr)},
                      {"candidate_persistent_bytes", cand_memory.result["persistent_bytes"]},
                      {"reference_persistent_bytes", ref_memory.result["persistent_bytes"]},
                      {"method", cand_memory.result["method"]},
                      {"partial", cand_memory.result.value("partial", false) ||
                                      ref_memory.result.value("partial", false)},
                      {"candidate_detail", cand_memory.result},
                      {"reference_detail", ref_memory.result}};
  }

  // The candidate's worker always goes. The reference session stays in its slot for the next
  // candidate unless this evaluation failed on the reference's side or the run directory was
  // tampered with (then nothing of it is trusted again).
  void cleanup(bool failed) {
    // Stopped now, whoever else holds the worker (kbv run's request until the evaluation
    // returns): a live CUDA context must not outlast the evaluation into a retry or a health
    // check. The last holder removes its folder.
    if (cand_worker_ && cand_worker_->process) cand_worker_->process->stop();
    cand_worker_.reset();
    cand_ = nullptr;
    own_session_.reset();
    auto* slot = request_.reference;
    if (slot && slot->session && (failed || result_.has_flag("run_dir_tampered"))) {
      slot->session.reset();
    }
  }

  const EvalRequest& request_;
  Protocol protocol_;
  Result result_;
  std::optional<StageFailure> failure_;
  std::optional<json> trace_case_;  // the case the trace runs on, once the re-checks passed
  std::optional<TraceAssessment> operator_trace_;  // the dispatcher trace, before timing
  fs::path run_dir_;
  std::string secret_;
  ReferenceSession* session_ = nullptr;            // the slot's, or own_session_
  std::unique_ptr<ReferenceSession> own_session_;  // when the request has no slot
  bool reused_ = false;
  // Waiting for the device gate (other evaluations' timing runs on the device), by the stage
  // (durations_s) the wait fell in.
  std::map<std::string, double> gate_wait_by_stage_;
  std::string stage_ = "start";
  double compile_s_ = 0, reference_s_ = 0, candidate_s_ = 0;
  std::shared_ptr<CandidateWorker> cand_worker_;
  WorkerProcess* cand_ = nullptr;  // cand_worker_'s process
  fs::path cand_dir_;              // cand_worker_'s folder
  int mirrored_preparations_ = -1;
  double ahead_wait_s_ = 0;  // waiting for a session started ahead to finish its preparation
  bool reference_started_ahead_ = false;  // the session's worker was started by kbv run ahead
  int precision_lowerings_ = 0;
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> run_dir_listing_;
};

Result evaluate(const EvalRequest& request) { return Evaluation(request).run(); }

}  // namespace kbv::eval
