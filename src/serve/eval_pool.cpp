#include "serve/eval_pool.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "core/clock.hpp"
#include "eval/candidate_worker.hpp"
#include "eval/evaluator.hpp"
#include "eval/harness_faults.hpp"
#include "eval/reference_session.hpp"
#include "eval/reference_work.hpp"
#include "judge/harness_fault.hpp"
#include "schedule/devices.hpp"
#include "schedule/resume.hpp"

namespace kbv::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A thread that has taken this many jobs of one problem in a row takes the oldest job next, so a
// steady stream of one problem's samples cannot starve another problem's.
constexpr int kMaxStreak = 64;

}  // namespace

EvalPool::EvalPool(JobQueue& queue, store::Store& db, PoolSettings settings)
    : queue_(queue), db_(db), settings_(std::move(settings)) {
  for (const auto& device : settings_.devices) {
    auto& gate = gates_[device];
    if (!gate) gate = std::make_unique<eval::DeviceGate>();
    for (int k = 0; k < std::max(1, settings_.workers_per_device); ++k) {
      slots_.push_back({device, "", ""});
      // A device named twice ("cpu,cpu") is one device with its threads side by side, as for
      // kbv run: they share its gate, its memory plan and the rule of the retry alone.
      ++threads_on_[device];
    }
  }
}

EvalPool::~EvalPool() {
  queue_.close();
  join();
}

void EvalPool::start() {
  for (size_t i = 0; i < slots_.size(); ++i) threads_.emplace_back([this, i] { run_thread(i); });
}

void EvalPool::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void EvalPool::log(const std::string& line) const {
  if (settings_.log) settings_.log(line);
}

json EvalPool::threads_json() const {
  std::lock_guard guard(state_);
  json out = json::array();
  for (const auto& s : slots_) {
    out.push_back({{"device", s.device},
                   {"job", s.job.empty() ? json(nullptr) : json(s.job)},
                   {"problem_sha256", s.problem.empty() ? json(nullptr) : json(s.problem)},
                   {"healthy", s.healthy}});
  }
  return out;
}

json EvalPool::health() const {
  const json threads = threads_json();
  json devices = json::array();  // in the order --devices names them, each once
  size_t live_total = 0;         // from the same snapshot as the devices' figures
  for (const auto& t : threads) {
    const auto device = t["device"].get<std::string>();
    auto d = std::find_if(devices.begin(), devices.end(),
                          [&](const json& entry) { return entry["device"] == device; });
    if (d == devices.end()) {
      devices.push_back({{"device", device}, {"workers", 0}, {"busy", 0}, {"healthy", false}});
      d = devices.end() - 1;
    }
    // Workers still taking work; a device whose threads all left after a failed health check
    // says healthy: false.
    const bool live = t["healthy"].get<bool>();
    live_total += live ? 1 : 0;
    (*d)["workers"] = (*d)["workers"].get<int>() + (live ? 1 : 0);
    (*d)["healthy"] = (*d)["healthy"].get<bool>() || live;
    (*d)["busy"] = (*d)["busy"].get<int>() + (t["job"].is_null() ? 0 : 1);
  }
  return {{"devices", devices}, {"workers", live_total}, {"threads", threads}};
}

std::string EvalPool::describe() const {
  return fmt::format("{} evaluation thread{} on {}", slots_.size(), slots_.size() == 1 ? "" : "s",
                     fmt::join(settings_.devices, ","));
}

double EvalPool::recent_seconds_per_evaluation() const {
  std::lock_guard guard(state_);
  return seconds_per_evaluation_;
}

void EvalPool::show(size_t index, const std::string& job, const std::string& problem) {
  std::lock_guard guard(state_);
  slots_[index].job = job;
  slots_[index].problem = problem;
}

void EvalPool::run_thread(size_t index) {
  const std::string device = slots_[index].device;
  eval::ReferenceSlot reference;  // this thread's warm reference session, one problem at a time
  std::string current;
  int streak = 0;
  bool healthy = true;
  // The next job's candidate worker, started while this one is evaluated (process start,
  // sandbox, torch import), as kbv run's device threads do; dropped when another thread took
  // that job meanwhile.
  std::shared_ptr<eval::CandidateWorker> ahead;
  std::string ahead_job;
  // What this thread keeps on the device (its reference session's cases, the worker ahead), let
  // go before a retry alone so that the retry has the device's memory to itself.
  auto let_go = [&] {
    reference.session.reset();
    reference.ahead.clear();
    ahead.reset();
    ahead_job.clear();
  };
  auto retry = [&](const Retry& r) { evaluate_alone(index, r, reference, healthy); };
  // This thread as the queue's taker: the job it starts a worker ahead for is left to it.
  const std::string taker = fmt::format("{}#{}", device, index);
  while (healthy) {
    // A retry waiting for the device goes before the next job; the thread that deferred it never
    // leaves before it has run, so the drain stores it too.
    alone_.run_waiting(device, let_go, retry);
    if (!healthy) break;
    auto job = queue_.take(streak >= kMaxStreak ? std::string() : current, taker);
    if (!job) break;
    // Taken while another thread deferred a retry on this device: it waits for that retry.
    while (!alone_.try_enter(device)) alone_.run_waiting(device, let_go, retry);
    if (!healthy) {
      alone_.leave(device);
      queue_.requeue({job->id});  // for another thread, or the next start
      break;
    }
    streak = job->problem_sha256 == current ? streak + 1 : 1;
    current = job->problem_sha256;
    std::shared_ptr<eval::CandidateWorker> prestarted;
    if (ahead_job == job->id) prestarted = std::move(ahead);
    ahead.reset();
    ahead_job.clear();
    auto next = queue_.peek(streak >= kMaxStreak ? std::string() : current, taker);
    if (next) {
      try {
        ahead = eval::start_candidate_worker(job_request(settings_.server, *next, device),
                                             next->candidate_sha256);
        ahead_job = next->id;
      } catch (const std::exception&) {
        // Started again, and its failure reported, in its own evaluation.
      }
    }
    start_reference_ahead(index, *job, next ? &*next : nullptr, reference);
    show(index, job->id, job->problem_sha256);
    evaluate_job(index, *job, reference, std::move(prestarted), healthy);
    show(index, "", "");
    alone_.leave(device);
  }
  queue_.forget(taker);
  if (!healthy) leave_unhealthy(index);
}

void EvalPool::leave_unhealthy(size_t index) {
  const std::string device = slots_[index].device;
  log(fmt::format("{} failed its health check: this thread takes no more work", device));
  {
    std::lock_guard guard(state_);
    slots_[index].healthy = false;
    if (std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.healthy; })) return;
  }
  const std::string why = fmt::format(
      "no healthy device is left ({} failed its health check last): restart the service once "
      "the devices are fixed; the {} queued jobs are kept and run then",
      device, queue_.queued());
  log(why);
  queue_.close(why);
}

size_t EvalPool::live_workers() const {
  std::lock_guard guard(state_);
  return static_cast<size_t>(
      std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.healthy; }));
}

std::optional<Result> EvalPool::evaluate(const Job& job, const eval::EvalRequest& request,
                                         const std::string& key) {
  try {
    return eval::evaluate(request);
  } catch (const eval::UsageError& error) {
    // The problem cannot be evaluated (the reference cannot load or run it): the request's
    // fault, not the candidate's; nothing is stored, the job says why.
    log(fmt::format("job {}: problem {} cannot be evaluated: {}", job.id, job.spec.problem_name,
                    error.what()));
    queue_.finish(job.id, JobStatus::Failed, key, error.what());
    return std::nullopt;
  } catch (const std::exception& error) {
    // A fault outside the evaluator (the gate, the ledger): stored as kbv run stores it.
    return eval::harness_error_result(
        request, judge::classify_exception(error, "evaluating the job"), job.spec.problem_name);
  }
}

eval::EvalRequest EvalPool::placed_request(size_t index, const Job& job,
                                           eval::ReferenceSlot& reference) {
  const std::string& device = slots_[index].device;
  eval::EvalRequest request = job_request(settings_.server, job, device);
  request.placement.reference = &reference;
  request.placement.spare_reference = eval::spare_references_wanted(device);
  request.placement.gate = gates_.at(device).get();
  request.placement.evaluations_per_device = threads_on_.at(device);
  request.placement.sessions_ahead = true;  // start_reference_ahead, on every device
  return request;
}

void EvalPool::start_reference_ahead(size_t index, const Job& job, const Job* next,
                                     eval::ReferenceSlot& reference) {
  std::optional<fs::path> next_problem;
  if (next) next_problem = fs::absolute(next->problem_file);
  if (!eval::keep_sessions_ahead(reference, fs::absolute(job.problem_file), next_problem)) return;
  try {
    reference.ahead[*next_problem] =
        eval::start_reference_session(placed_request(index, *next, reference), false);
  } catch (const std::exception&) {
    // Started again, and its failure reported, in its own evaluation.
  }
}

void EvalPool::evaluate_job(size_t index, const Job& job, eval::ReferenceSlot& reference,
                            std::shared_ptr<eval::CandidateWorker> prestarted, bool& healthy) {
  const std::string& device = slots_[index].device;
  const int sharing = threads_on_.at(device);
  eval::EvalRequest request = placed_request(index, job, reference);
  request.placement.prestarted = std::move(prestarted);
  const std::string key =
      job_store_key(settings_.server, job.spec, job.problem_sha256, job.candidate_sha256, device);
  // An identical job ahead of this one (RL resamples the same completion) was evaluated
  // meanwhile: its stored result answers this one too, as a rerun of kbv run would skip it.
  if (auto stored = db_.get(key); stored && !schedule::evaluate_again(*stored, request.limits)) {
    queue_.finish(job.id, JobStatus::Done, key, "", /*from_store=*/true);
    return;
  }
  if (settings_.builds) settings_.builds->before_evaluation(job.candidate_sha256);
  const auto started = Clock::now();
  auto result = evaluate(job, request, key);
  if (!result) return;
  if (schedule::needs_retry_alone(*result, sharing)) {
    // Not stored: the job stays running (a restart queues it again) until its retry alone.
    const std::string first = schedule::first_attempt(*result);
    alone_.defer(device, {job, first});
    log(fmt::format("job {} ({}) on {}: {}; evaluated again alone once the others are done", job.id,
                    job.spec.problem_name, device, first));
    return;
  }
  store(index, job, key, *result, seconds_since(started), healthy);
}

void EvalPool::evaluate_alone(size_t index, const Retry& retry, eval::ReferenceSlot& reference,
                              bool& healthy) {
  const Job& job = retry.job;
  const std::string& device = slots_[index].device;
  show(index, job.id, job.problem_sha256);
  eval::EvalRequest request = job_request(settings_.server, job, device);
  request.placement.reference = &reference;
  schedule::place_alone(request);
  const std::string key =
      job_store_key(settings_.server, job.spec, job.problem_sha256, job.candidate_sha256, device);
  const auto started = Clock::now();
  if (auto result = evaluate(job, request, key)) {
    schedule::mark_evaluated_alone(*result, retry.first_attempt);
    store(index, job, key, *result, seconds_since(started), healthy);
  }
  show(index, "", "");
}

void EvalPool::store(size_t index, const Job& job, const std::string& key, const Result& result,
                     double seconds, bool& healthy) {
  const std::string& device = slots_[index].device;
  try {
    db_.put(job_row_info(key, job.spec), result.to_json());
  } catch (const std::exception& error) {
    // kbv's fault, not the request's: a resubmission evaluates it again (nothing was stored).
    queue_.finish(job.id, JobStatus::Failed, key,
                  fmt::format("the result could not be stored: {}", error.what()),
                  /*from_store=*/false, JobFailure::Service);
    return;
  }
  queue_.finish(job.id, JobStatus::Done, key);
  {
    std::lock_guard guard(state_);
    seconds_per_evaluation_ = 0.8 * seconds_per_evaluation_ + 0.2 * seconds;
  }
  log(fmt::format("job {} ({}) on {}: {} in {:.1f} s{}", job.id, job.spec.problem_name, device,
                  to_string(result.verdict), seconds,
                  result.has_flag("evaluated_alone") ? " (alone)" : ""));
  // A crash or hang may have wedged the GPU: a wedged device must not fail every later job.
  if (device.starts_with("cuda") && schedule::worth_a_health_check(result)) {
    healthy = schedule::device_healthy(device);
  }
}

}  // namespace kbv::serve
