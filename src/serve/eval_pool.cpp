#include "serve/eval_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <regex>

#include "core/clock.hpp"
#include "eval/candidate_worker.hpp"
#include "eval/evaluator.hpp"
#include "eval/harness_faults.hpp"
#include "eval/reference_session.hpp"
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

// "level1/3_ReLU" says the row's level and problem id, as kbv run's layout does (kbv report
// groups by them); other names say neither.
store::RowInfo row_info(const std::string& key, const JobSpec& spec) {
  store::RowInfo row{key, spec.run, spec.problem_name, std::nullopt, std::nullopt, std::nullopt};
  static const std::regex layout(R"(level(\d+)/(\d+)_.*)");
  std::smatch m;
  if (std::regex_match(spec.problem_name, m, layout)) {
    row.level = std::stoi(m[1]);
    row.problem_id = std::stoi(m[2]);
  }
  return row;
}

}  // namespace

eval::EvalRequest job_request(const eval::EvalRequest& server, const Job& job,
                              const std::string& device) {
  eval::EvalRequest request = server;
  request.problem = job.problem_file;
  request.candidate = job.candidate_file;
  request.settings = job.spec.settings;
  request.settings.device = device;
  request.settings.sandbox = server.settings.sandbox;  // the operator's, never a request's
  request.limits = job.spec.limits;
  request.placement.progress = nullptr;
  return request;
}

std::string job_store_key(const eval::EvalRequest& server, const JobSpec& spec,
                          const std::string& problem_sha256, const std::string& candidate_sha256,
                          const std::string& device) {
  eval::EvalSettings settings = spec.settings;
  settings.device = device;
  settings.sandbox = server.settings.sandbox;
  return store::run_key(problem_sha256, candidate_sha256, settings.key());
}

EvalPool::EvalPool(JobQueue& queue, store::Store& db, PoolSettings settings)
    : queue_(queue), db_(db), settings_(std::move(settings)) {
  for (const auto& device : settings_.devices) {
    auto& gate = gates_[device];
    if (!gate) gate = std::make_unique<eval::DeviceGate>();
    for (int k = 0; k < std::max(1, settings_.workers_per_device); ++k) {
      slots_.push_back({device, "", ""});
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
                   {"problem_sha256", s.problem.empty() ? json(nullptr) : json(s.problem)}});
  }
  return out;
}

double EvalPool::recent_seconds_per_evaluation() const {
  std::lock_guard guard(state_);
  return seconds_per_evaluation_;
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
  while (healthy) {
    auto job = queue_.take(streak >= kMaxStreak ? std::string() : current);
    if (!job) break;
    streak = job->problem_sha256 == current ? streak + 1 : 1;
    current = job->problem_sha256;
    std::shared_ptr<eval::CandidateWorker> prestarted;
    if (ahead_job == job->id) prestarted = std::move(ahead);
    ahead.reset();
    ahead_job.clear();
    if (auto next = queue_.peek(streak >= kMaxStreak ? std::string() : current)) {
      try {
        ahead = eval::start_candidate_worker(job_request(settings_.server, *next, device),
                                             next->candidate_sha256);
        ahead_job = next->id;
      } catch (const std::exception&) {
        // Started again, and its failure reported, in its own evaluation.
      }
    }
    {
      std::lock_guard guard(state_);
      slots_[index].job = job->id;
      slots_[index].problem = job->problem_sha256;
    }
    evaluate_job(index, *job, reference, std::move(prestarted), healthy);
    std::lock_guard guard(state_);
    slots_[index].job.clear();
  }
  if (!healthy)
    log(fmt::format("{} failed its health check: this thread takes no more work", device));
}

void EvalPool::evaluate_job(size_t index, const Job& job, eval::ReferenceSlot& reference,
                            std::shared_ptr<eval::CandidateWorker> prestarted, bool& healthy) {
  const std::string& device = slots_[index].device;
  eval::EvalRequest request = job_request(settings_.server, job, device);
  request.placement.reference = &reference;
  request.placement.gate = gates_.at(device).get();
  request.placement.evaluations_per_device = std::max(1, settings_.workers_per_device);
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
  Result result;
  try {
    result = eval::evaluate(request);
  } catch (const eval::UsageError& error) {
    // The problem cannot be evaluated (the reference cannot load or run it): the request's
    // fault, not the candidate's; nothing is stored, the job says why.
    log(fmt::format("job {}: problem {} cannot be evaluated: {}", job.id, job.spec.problem_name,
                    error.what()));
    queue_.finish(job.id, JobStatus::Failed, key, error.what());
    return;
  } catch (const std::exception& error) {
    // A fault outside the evaluator (the gate, the ledger): stored as kbv run stores it.
    result = eval::harness_error_result(
        request, judge::classify_exception(error, "evaluating the job"), job.spec.problem_name);
  }
  const double seconds = seconds_since(started);
  try {
    db_.put(row_info(key, job.spec), result.to_json());
  } catch (const std::exception& error) {
    queue_.finish(job.id, JobStatus::Failed, key,
                  fmt::format("the result could not be stored: {}", error.what()));
    return;
  }
  queue_.finish(job.id, JobStatus::Done, key);
  {
    std::lock_guard guard(state_);
    seconds_per_evaluation_ = 0.8 * seconds_per_evaluation_ + 0.2 * seconds;
  }
  log(fmt::format("job {} ({}) on {}: {} in {:.1f} s", job.id, job.spec.problem_name, device,
                  to_string(result.verdict), seconds));
  // A crash or hang may have wedged the GPU: a wedged device must not fail every later job.
  if (device.starts_with("cuda") &&
      (result.verdict == Verdict::RuntimeError || result.verdict == Verdict::Timeout ||
       result.verdict == Verdict::HarnessError)) {
    healthy = schedule::device_healthy(device);
  }
}

}  // namespace kbv::serve
