#include "schedule/suite.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "core/clock.hpp"
#include "core/hash.hpp"
#include "eval/device_gate.hpp"
#include "eval/evaluator.hpp"
#include "eval/harness_faults.hpp"
#include "eval/reference_session.hpp"
#include "eval/reference_work.hpp"
#include "eval/workspace.hpp"
#include "judge/harness_fault.hpp"
#include "orchestrate/build_cache.hpp"
#include "schedule/build_ahead.hpp"
#include "schedule/devices.hpp"
#include "schedule/resume.hpp"
#include "schedule/retry_alone.hpp"
#include "schedule/task_picker.hpp"
#include "schedule/work_list.hpp"
#include "store/store.hpp"

namespace kbv::schedule {
namespace fs = std::filesystem;
using eval::CandidateWorker;
using eval::DeviceGate;
using eval::EvalRequest;
using eval::ReferenceSlot;
using nlohmann::json;

std::string verdict_counts(const std::map<std::string, int>& verdicts) {
  std::string out;
  for (const auto& [verdict, n] : verdicts)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", verdict, n);
  return out.empty() ? "none yet" : out;
}

void interleave_by_level(std::vector<const Task*>& ordered) {
  // Each problem's rank within its level (paths are sorted: a problem's candidates are
  // consecutive and share its rank), then level by level within a rank.
  std::map<std::optional<int>, std::vector<fs::path>> problems_of_level;
  for (const auto* t : ordered) {
    auto& problems = problems_of_level[t->problem.level];
    if (problems.empty() || problems.back() != t->problem.path) problems.push_back(t->problem.path);
  }
  std::map<fs::path, size_t> rank;
  for (const auto& [level, problems] : problems_of_level) {
    for (size_t i = 0; i < problems.size(); ++i) rank[problems[i]] = i;
  }
  std::stable_sort(ordered.begin(), ordered.end(), [&](const Task* a, const Task* b) {
    return std::tuple(rank.at(a->problem.path), a->problem.level) <
           std::tuple(rank.at(b->problem.path), b->problem.level);
  });
}

namespace {

// A task to evaluate again with the device to itself once the run's other evaluations on it are
// done (schedule/retry_alone.hpp).
struct DeferredRetry {
  size_t index;
  std::string first_attempt;  // its verdict and reason, for the evaluated_alone flag
  double built_in = 0;        // its build ahead's seconds
  // Started when it was deferred, while the device drains (DeviceThread::start_retry_ahead): its
  // problem loaded on the host and its candidate's worker; either may be null (started then).
  std::unique_ptr<eval::ReferenceSession> session;
  std::shared_ptr<CandidateWorker> worker;
};

// What the device threads of one run share. Everything but the gates, the build board, the store
// and the retries alone (each guarded by itself) is under `lock`.
struct SharedRun {
  const SuiteRequest& request;
  const WorkList& work;
  BuildBoard& builds;
  store::Store& db;
  SuiteSummary& summary;
  Clock::time_point started;
  std::map<std::string, std::unique_ptr<DeviceGate>> gates;
  std::vector<std::string> threads_on;  // the device of each thread
  size_t devices = 1;                   // as named (cpu,cpu is two)
  std::mutex lock;
  TaskPicker picker;
  std::set<fs::path> broken_problems;
  std::set<fs::path> compile_counted;  // a build shared by identical files counts once
  std::set<std::string> unhealthy;     // devices that failed a health check
  // Evaluations in progress per device, and first attempts that failed on a shared device.
  AloneRetries<DeferredRetry> alone;
  size_t finished = 0;
  std::vector<bool> recorded;  // by task: its result was recorded

  SharedRun(const SuiteRequest& r, const WorkList& w, BuildBoard& b, store::Store& d,
            SuiteSummary& s)
      : request(r),
        work(w),
        builds(b),
        db(d),
        summary(s),
        started(Clock::now()),
        picker(w.tasks),
        recorded(w.tasks.size(), false) {}

  // Under `lock`.
  void log(const std::string& line) const {
    if (request.settings.placement.progress) request.settings.placement.progress(line);
  }
};

// One evaluation thread on one device: takes tasks (and reserves its next one, whose candidate
// worker and reference it starts ahead), evaluates, stores, and stops when nothing is left or
// its device failed a health check.
class DeviceThread {
 public:
  DeviceThread(SharedRun& run, std::string device)
      : run_(run),
        device_(std::move(device)),
        gate_(run.gates.at(device_).get()),
        evaluations_on_device_(
            static_cast<int>(std::count(run.threads_on.begin(), run.threads_on.end(), device_))),
        spare_references_(eval::spare_references_wanted(device_)) {}

  void operator()() {
    while (true) {
      run_waiting_retries();
      auto task = take();
      if (!task && waits_for_retries_) continue;  // a retry came first: wait for it
      if (!task) return;
      const bool healthy = evaluate_and_store(task->index, std::move(task->ahead));
      run_.alone.leave(device_);
      if (!healthy) return;
    }
  }

 private:
  struct Taken {
    size_t index;
    std::shared_ptr<CandidateWorker> ahead;  // its worker, when it was this thread's reserved one
  };

  const Task& task(size_t k) const { return *run_.work.tasks[k]; }

  EvalRequest request_for(size_t k) {
    EvalRequest eval = run_.request.settings;
    eval.problem = task(k).problem.path;
    eval.candidate = task(k).candidate.path;
    eval.settings.device = device_;
    eval.placement.progress = nullptr;  // one line per candidate, not per stage
    eval.placement.reference = &reference_;
    eval.placement.spare_reference = spare_references_;
    // Always through the gate: besides other evaluations on the device, the reference of the
    // next problem prepares ahead on it, and a timing run must exclude both.
    eval.placement.gate = gate_;
    eval.placement.evaluations_per_device = evaluations_on_device_;
    eval.placement.sessions_ahead = true;  // start_ahead, on every device
    return eval;
  }

  void leave() {
    if (next_) run_.picker.put_back(*next_);
    run_.picker.leave(current_);
  }

  // The next task, and the one after it reserved with its worker and reference started ahead;
  // nullopt when this thread is done.
  std::optional<Taken> take() {
    std::optional<Taken> taken;
    // Workers are stopped (destroyed) outside the lock: stopping one may take a moment.
    std::shared_ptr<CandidateWorker> dropped;
    {
      std::lock_guard guard(run_.lock);
      // Counted as in progress from here (released below when nothing is taken), atomically with
      // the check for a waiting retry: no task starts beside a retry that has the device alone.
      waits_for_retries_ = !run_.alone.try_enter(device_);
      if (waits_for_retries_) return std::nullopt;
      while (!taken) {
        if (run_.unhealthy.count(device_)) {
          leave();
          run_.alone.leave(device_);
          return std::nullopt;
        }
        std::optional<size_t> picked;
        std::shared_ptr<CandidateWorker> ahead;
        if (next_ && run_.picker.claim(*next_)) {
          picked = next_;
          ahead = std::move(next_worker_);
        }
        dropped = std::move(next_worker_);  // its task was stolen by an idle thread
        next_.reset();
        auto built = [&](size_t k) { return run_.builds.is_built(run_.work.caches[k]); };
        if (!picked) picked = run_.picker.pick(current_, run_.broken_problems, built);
        if (!picked) picked = run_.picker.steal(current_);
        if (!picked) {
          leave();
          run_.alone.leave(device_);
          return std::nullopt;
        }
        current_ = task(*picked).problem.path;
        if (run_.broken_problems.count(current_)) continue;
        next_ = run_.picker.pick(current_, run_.broken_problems, built, /*reserve=*/true);
        if (next_) current_ = task(*next_).problem.path;
        taken = Taken{*picked, std::move(ahead)};
      }
    }
    start_ahead(taken->index);
    return taken;
  }

  // The reserved task's candidate worker (process start, sandbox, torch import: 3.6 s per
  // evaluation on the H200, docs/results/issue4-suite-bench-h200.md) and, when its problem is
  // not this task's, its reference session, started beside this evaluation. Only sessions for
  // this task and the next are kept.
  void start_ahead(size_t i) {
    const fs::path this_problem = fs::absolute(task(i).problem.path);
    std::optional<fs::path> next_problem;
    if (next_) next_problem = fs::absolute(task(*next_).problem.path);
    const bool start_session = eval::keep_sessions_ahead(reference_, this_problem, next_problem);
    if (!next_) return;
    next_worker_ = try_start_candidate_worker(*next_);
    if (start_session) {
      if (auto session = try_start_reference_session(*next_, /*load_only=*/false)) {
        reference_.ahead[*next_problem] = std::move(session);
      }
    }
  }

  // A reference session for task `k`'s problem, started before its evaluation (load_only: see
  // eval::start_reference_session); null where the start failed (it is started again, and its
  // failure reported, in the evaluation).
  std::unique_ptr<eval::ReferenceSession> try_start_reference_session(size_t k, bool load_only) {
    try {
      return eval::start_reference_session(request_for(k), load_only);
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  // Task `k`'s candidate worker, started before its evaluation; null where the start failed (it
  // is started again, and its failure reported, in the evaluation).
  std::shared_ptr<CandidateWorker> try_start_candidate_worker(size_t k) {
    try {
      return eval::start_candidate_worker(request_for(k), run_.work.candidate_sha256[k]);
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  // The evaluation; nullopt when the problem is broken (recorded once, nothing stored: a rerun
  // retries it).
  std::optional<Result> evaluate_guarded(size_t i, EvalRequest& eval) {
    const auto& problem = eval.problem;
    try {
      Result result = eval::evaluate(eval);
      eval.placement.prestarted.reset();  // the evaluation stopped it; this frees its folder now
      return result;
    } catch (const eval::UsageError& error) {
      std::lock_guard guard(run_.lock);
      if (run_.broken_problems.insert(problem).second) {
        run_.summary.broken_problems.push_back({problem, error.what()});
        run_.log(fmt::format("problem {} cannot be evaluated: {}", problem.string(), error.what()));
      }
      return std::nullopt;
    } catch (const std::exception& error) {
      // The evaluator turns faults inside an evaluation into harness_error results itself; this
      // is one outside it (the gate, the ledger). The same outcome: stored, the run goes on.
      return kbv::eval::harness_error_result(
          eval, judge::classify_exception(error, "evaluating the task"), task(i).problem.name);
    }
  }

  // A retry waiting for the device alone goes before any new task: this thread lets its kept
  // reference work go (its cases are on the device) and waits until no evaluation on the device
  // runs; the last to stop runs the retries, then every thread goes on (schedule/retry_alone.hpp).
  void run_waiting_retries() {
    run_.alone.run_waiting(
        device_, [&] { let_kept_work_go(); },
        [&](DeferredRetry& deferred) { evaluate_alone(deferred); });
  }

  // A deferred retry's problem loaded (on the host, as a postponed task's is) and its
  // candidate's worker started now, while the evaluations in progress on the device finish:
  // the retry alone then starts drawing at once. Started there, 2_ShallowWideMLP's retry alone
  // spent 34 s on the two loads, one after the other, with the device idle (session 31).
  void start_retry_ahead(DeferredRetry& retry) {
    retry.session = try_start_reference_session(retry.index, /*load_only=*/true);
    retry.worker = try_start_candidate_worker(retry.index);
  }

  // A task whose first attempt failed with the device shared, evaluated again once the
  // evaluations in progress on the device have finished: the device and all of its memory to
  // itself. (The gate alone stops the others' calls, not their cases and allocator caches: a
  // retried attention problem ran out of memory again with 7 GB of the H200 free, session 11.)
  void evaluate_alone(DeferredRetry& deferred) {
    EvalRequest eval = request_for(deferred.index);
    place_alone(eval);
    if (deferred.session) {
      reference_.ahead[fs::absolute(task(deferred.index).problem.path)] =
          std::move(deferred.session);
    }
    eval.placement.prestarted = std::move(deferred.worker);
    auto result = evaluate_guarded(deferred.index, eval);
    if (!result) return;
    mark_evaluated_alone(*result, deferred.first_attempt);
    record(deferred.index, std::move(*result), deferred.built_in);
  }

  // The reference sessions this thread keeps (the current problem's cases, the next problem's
  // drawn ahead) and its next candidate's worker: stopped, so that their device memory is free.
  void let_kept_work_go() {
    reference_.session.reset();
    reference_.ahead.clear();
    next_worker_.reset();
  }

  // Whether task `i` goes back, with its problem's other open tasks, to be evaluated after the
  // tasks that share the device (the picker's postpone()): its problem needs the device's
  // memory to itself before its first draw, and a task that does not is still open. Evaluated
  // now, it would stop the device's other evaluations from starting until all had finished (a
  // drain, the device half idle). The answer comes from the problem's load: a session started
  // ahead by this thread, or one started now and awaited (the load its evaluation would make
  // anyway; session 26's H100 audit: 9 of 33 such problems had no session ahead and each
  // drained the device mid-run, waiting up to 77 s). A problem whose session this thread
  // already holds is evaluated now: its cases are drawn, and dropping them would draw them again.
  // `worker`: the task's candidate worker, started here where none was started ahead, so that
  // its process start overlaps the load awaited (as it overlaps the evaluation's own load).
  bool postpone_for_device_alone(size_t i, std::shared_ptr<CandidateWorker>& worker) {
    if (evaluations_on_device_ <= 1) return false;
    const fs::path problem = fs::absolute(task(i).problem.path);
    if (reference_.session && reference_.session->problem == problem) return false;
    {
      std::lock_guard guard(run_.lock);
      if (!could_be_postponed(i)) return false;
    }
    auto ahead = reference_.ahead.find(problem);
    if (ahead == reference_.ahead.end() || !ahead->second) {
      // Loaded only (on the host): its evaluation, next, places the model and draws under
      // its own reservation rather than within the device's share for work ahead.
      auto session = try_start_reference_session(i, /*load_only=*/true);
      if (!session) return false;
      reference_.ahead[problem] = std::move(session);
      ahead = reference_.ahead.find(problem);
      if (!worker) worker = try_start_candidate_worker(i);
    }
    if (!eval::await_needs_whole_device(*ahead->second)) return false;
    remember_device_alone(i, ahead->second->loaded);
    std::lock_guard guard(run_.lock);
    if (!could_be_postponed(i)) return false;  // asked again: the others may have gone meanwhile
    run_.summary.postponed += run_.picker.postpone(i);
    run_.log(
        fmt::format("{} {} on {}: needs the device's memory to itself; evaluated after the "
                    "tasks that share the device",
                    task(i).candidate.run, task(i).candidate.path.filename().string(), device_));
    return true;
  }

  // Tells the run's database that task `i`'s problem needs the device's memory to itself, for a
  // rerun over it to order the problem last from its start (postpone_remembered).
  void remember_device_alone(size_t i, const json& loaded) {
    try {
      run_.db.remember_device_alone(run_.work.problem_sha256[i], eval::loaded_device_bytes(loaded),
                                    eval::loaded_working_bytes_before_drawing(loaded));
    } catch (const std::exception&) {
      // Only a hint (the database's disk is full, say): a rerun loads the problem to learn it.
    }
  }

  // Whether task `i` could still be postponed: not yet, and another open task would go first.
  // Under run_.lock.
  bool could_be_postponed(size_t i) const {
    return !run_.picker.postponed(i) && run_.picker.others_open(run_.broken_problems);
  }

  // False when the device failed its health check (this thread stops).
  bool evaluate_and_store(size_t i, std::shared_ptr<CandidateWorker> ahead) {
    if (postpone_for_device_alone(i, ahead)) return true;  // `ahead`, its worker, stops here
    const auto& t = task(i);
    double built_in = run_.builds.wait(run_.work.caches[i]);
    EvalRequest eval = request_for(i);
    eval.placement.prestarted = std::move(ahead);
    auto result = evaluate_guarded(i, eval);
    if (!result) return true;
    if (needs_retry_alone(*result, evaluations_on_device_, draws_ahead_beside(device_))) {
      const std::string first = first_attempt(*result);
      DeferredRetry retry{i, first, built_in, nullptr, nullptr};
      start_retry_ahead(retry);
      run_.alone.defer(device_, std::move(retry));
      std::lock_guard guard(run_.lock);
      run_.log(fmt::format("{} {} on {}: {}; evaluated again alone once the others are done",
                           t.candidate.run, t.candidate.path.filename().string(), device_, first));
      return true;
    }
    return record(i, std::move(*result), built_in);
  }

  // Stores a task's result, counts it and reports it; false when the device failed its health
  // check after it.
  bool record(size_t i, Result result, double built_in) {
    const auto& t = task(i);
    {
      // The build ahead of evaluation is this result's compile time too.
      std::lock_guard guard(run_.lock);
      double build = run_.compile_counted.insert(run_.work.caches[i]).second ? built_in : 0.0;
      auto& split = result.durations_s["split"];
      result.durations_s["build_ahead"] = build;
      split["compile"] = split.value("compile", 0.0) + build;
      for (const auto& [part, value] : split.items()) {
        run_.summary.split[part] = run_.summary.split.value(part, 0.0) + value.get<double>();
      }
      run_.summary.reference_sessions += reference_.sessions_started - sessions_counted_;
      sessions_counted_ = reference_.sessions_started;
    }
    bool stored = true;
    try {
      run_.db.put({run_.work.keys[i], t.candidate.run, t.problem.name, t.candidate.level,
                   t.candidate.problem_id, t.candidate.sample},
                  result.to_json());
    } catch (const std::exception& error) {
      // Storing failed (the database's disk is full): kbv's fault, reported; a rerun retries the
      // task, since nothing is stored for it.
      stored = false;
      auto fault = judge::classify_exception(error, "storing the result");
      result = kbv::eval::harness_error_result(request_for(i), fault, t.problem.name);
    }
    bool healthy = true;
    if (device_.starts_with("cuda") && worth_a_health_check(result)) {
      healthy = device_healthy(device_);
    }
    std::lock_guard guard(run_.lock);
    auto& summary = run_.summary;
    if (result.verdict == Verdict::HarnessError && result.harness_fault) {
      summary.harness_errors.push_back({t.candidate.path,
                                        std::string(to_string(result.harness_fault->kind)),
                                        result.reason, stored});
    }
    ++summary.evaluated;
    ++run_.finished;
    run_.recorded[i] = true;
    summary.verdicts[std::string(to_string(result.verdict))] += 1;
    const size_t total = run_.work.tasks.size();
    const auto devices = static_cast<double>(run_.devices);
    double per = seconds_since(run_.started) / static_cast<double>(run_.finished) / devices;
    run_.log(fmt::format("[{}/{}] {} {} on {}: {} | {} | ETA {:.0f} s", run_.finished, total,
                         t.candidate.run, t.candidate.path.filename().string(), device_,
                         to_string(result.verdict), verdict_counts(summary.verdicts),
                         per * static_cast<double>(total - run_.finished)));
    if (healthy) return true;
    if (run_.unhealthy.insert(device_).second) {
      run_.log(
          fmt::format("{} failed its health check after that candidate; no more work is "
                      "sent to it in this run",
                      device_));
    }
    leave();
    return false;
  }

  SharedRun& run_;
  const std::string device_;
  DeviceGate* gate_;
  const int evaluations_on_device_;
  const bool spare_references_;  // a spare reference worker in reference_ (on a GPU)
  ReferenceSlot reference_;      // this thread's kept reference work, one problem at a time
  int sessions_counted_ = 0;
  fs::path current_;  // the problem of the last task taken
  // The thread's next task, reserved when the current one starts, and its candidate's worker.
  std::optional<size_t> next_;
  std::shared_ptr<CandidateWorker> next_worker_;
  bool waits_for_retries_ = false;  // take() found a retry to wait for
};

// Tasks whose problem an earlier run over this database found needing a device's memory to
// itself (DeviceThread::remember_device_alone) go after the others from the start, as they would
// once each problem's load had said so: a resumed run no longer loads each of them first, one
// after another, to put it back (session 28's H100 audit, resumed with 21 such problems open:
// its first 100 s). Only an order: on a larger device, such a task, when its turn comes, shares
// the device as any other. Where no device has two evaluations at once nothing is postponed.
void postpone_remembered(SharedRun& run) {
  std::map<std::string, int> per_device;
  for (const auto& device : run.threads_on) ++per_device[device];
  if (std::none_of(per_device.begin(), per_device.end(),
                   [](const auto& d) { return d.second > 1; })) {
    return;
  }
  std::map<std::string, double> remembered;
  try {
    remembered = run.db.problems_needing_device_alone();
  } catch (const std::exception&) {
    return;  // a hint only
  }
  int tasks = 0;
  std::set<fs::path> problems;
  for (size_t i = 0; i < run.work.tasks.size(); ++i) {
    if (!remembered.count(run.work.problem_sha256[i]) || run.picker.postponed(i)) continue;
    tasks += run.picker.postpone(i);
    problems.insert(run.work.tasks[i]->problem.path);
  }
  if (tasks == 0) return;
  run.summary.postponed += tasks;
  run.log(
      fmt::format("{} task{} of {} problem{} put after the others from the start: an earlier "
                  "run over {} found them needing a device's memory to itself",
                  tasks, tasks == 1 ? "" : "s", problems.size(), problems.size() == 1 ? "" : "s",
                  run.request.database.string()));
}

}  // namespace

SuiteSummary run_suite(const SuiteRequest& request) {
  SuiteSummary summary;
  const auto& progress = request.settings.placement.progress;
  auto log = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (!fs::exists(request.problems)) {
    throw eval::UsageError(
        fmt::format("problem folder {} does not exist", request.problems.string()));
  }
  if (!fs::exists(request.candidates)) {
    throw eval::UsageError(
        fmt::format("candidate folder {} does not exist", request.candidates.string()));
  }
  auto found = pair_candidates(find_problems(request.problems), request.candidates);
  summary.unmatched = found.unmatched;
  summary.suite_tasks = static_cast<int>(found.tasks.size());
  found.tasks = tasks_of_shard(found.tasks, request.shard, request.problems);
  summary.tasks = static_cast<int>(found.tasks.size());
  std::set<fs::path> shard_problems;
  for (const auto& t : found.tasks) shard_problems.insert(t.problem.path);
  summary.shard_problems = static_cast<int>(shard_problems.size());
  if (!request.shard.whole()) {
    log(fmt::format("shard {}/{}: {} of the suite's {} tasks ({} problems)", request.shard.index,
                    request.shard.count, summary.tasks, summary.suite_tasks,
                    summary.shard_problems));
  }
  for (const auto& u : found.unmatched)
    log(fmt::format("skipped {}: {}", u.path.string(), u.reason));

  store::Store db(request.database);
  const WorkList work = work_left(found.tasks, db, request, summary);
  std::string again;
  if (summary.evaluated_again > 0) {
    again +=
        fmt::format("{} stored timeouts again, under a longer timeout", summary.evaluated_again);
  }
  if (summary.harness_errors_again > 0) {
    again += fmt::format("{}{} stored harness errors again", again.empty() ? "" : "; ",
                         summary.harness_errors_again);
  }
  log(fmt::format("{} tasks: {} already in {}, {} to evaluate{}", summary.tasks,
                  summary.already_done, request.database.string(), work.tasks.size(),
                  again.empty() ? "" : " (" + again + ")"));
  if (work.tasks.empty()) return summary;

  const auto& work_dir = request.settings.placement.work_dir;
  auto scratch = (work_dir.empty() ? fs::temp_directory_path() : work_dir) /
                 fmt::format("kbv-build-{}", ::getpid());
  fs::create_directories(scratch);
  eval::FolderOwner scratch_owner(scratch, /*keep=*/false);  // a killed run's is reclaimed
  BuildBoard builds;
  SharedRun run(request, work, builds, db, summary);

  // Builds run beside the evaluation: each candidate waits only for its own. Their progress
  // lines go through the run's lock.
  EvalRequest build_settings = request.settings;
  if (progress) {
    build_settings.placement.progress = [&](const std::string& line) {
      std::lock_guard guard(run.lock);
      progress(line);
    };
  }
  std::thread builder([&] {
    try {
      build_ahead(work.tasks, work.caches, build_settings, request.build_jobs, scratch,
                  [&](const fs::path& cache, double seconds) { builds.built(cache, seconds); });
    } catch (const std::exception& error) {
      std::lock_guard guard(run.lock);
      log(fmt::format("building ahead stopped: {}; candidates build as they are evaluated",
                      error.what()));
    }
    builds.finish();
    std::error_code ec;
    fs::remove_all(scratch, ec);
    summary.build_seconds = seconds_since(run.started);
  });

  auto devices = request.devices.empty()
                     ? std::vector<std::string>{request.settings.settings.device}
                     : request.devices;
  // Several evaluations per device share it through its gate: only timing is exclusive.
  const int cuda_devices = static_cast<int>(std::count_if(
      devices.begin(), devices.end(), [](const std::string& d) { return d.starts_with("cuda"); }));
  run.devices = devices.size();
  for (const auto& device : devices) {
    auto& gate = run.gates[device];
    if (!gate) gate = std::make_unique<DeviceGate>();
    int per =
        request.workers_per_device > 0
            ? request.workers_per_device
            : default_workers_per_device(device, cuda_devices, std::thread::hardware_concurrency());
    for (int k = 0; k < per; ++k) run.threads_on.push_back(device);
  }
  postpone_remembered(run);
  std::vector<std::thread> threads;
  for (const auto& device : run.threads_on) threads.emplace_back(DeviceThread(run, device));
  for (auto& t : threads) t.join();
  // Every deferred retry has run by now: the thread that deferred one waits for it before it
  // takes another task or leaves (run_waiting_retries).
  builder.join();
  // A task left open when its device failed its health check, once the threads that could take
  // it had stopped (one put back, or postponed): nothing is stored, so a rerun evaluates it.
  for (size_t i = 0; i < work.tasks.size(); ++i) {
    if (!run.recorded[i] && !run.broken_problems.count(work.tasks[i]->problem.path)) {
      ++summary.not_evaluated;
    }
  }
  summary.evaluation_seconds = seconds_since(run.started);
  return summary;
}

}  // namespace kbv::schedule
