// The service's local evaluators ("local" in serve/evaluators.hpp): per device, as many threads
// as --workers-per-device, each pulling jobs from the durable queue, evaluating them with the
// engine (eval::evaluate, sandboxed workers, the device's gate: one timing at a time per device)
// and storing each result in the results database as it finishes, under kbv run's key. Each
// thread keeps a ReferenceSlot and takes its current problem's jobs first, so RL's many samples
// of one problem reuse one warm reference session (its worker, its drawn cases and golden
// outputs). A failure on a shared device is evaluated again alone before it is stored, by kbv
// run's rule and mechanism (schedule/retry_alone.hpp).
#pragma once

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/result.hpp"
#include "eval/device_gate.hpp"
#include "eval/eval_request.hpp"
#include "schedule/retry_alone.hpp"
#include "serve/evaluators.hpp"

namespace kbv::eval {
struct ReferenceSlot;
}

namespace kbv::serve {

class EvalPool final : public Evaluators {
 public:
  EvalPool(JobQueue& queue, store::Store& db, PoolSettings settings);
  ~EvalPool() override;
  EvalPool(const EvalPool&) = delete;
  EvalPool& operator=(const EvalPool&) = delete;

  void start() override;
  // Waits for every thread; they end once the queue is closed and their evaluation in flight
  // (and any retry alone waiting on their device) has finished and been stored, or when their
  // device fails a health check.
  void join() override;

  nlohmann::json health() const override;
  size_t capacity() const override { return slots_.size(); }
  size_t live_workers() const override;
  double recent_seconds_per_evaluation() const override;
  std::string describe() const override;

  // Per thread: its device, and the job it evaluates (null when idle).
  nlohmann::json threads_json() const;

 private:
  struct Slot {
    std::string device;
    std::string job;  // under state_
    std::string problem;
    bool healthy = true;  // under state_: false once its device failed a health check
  };
  // A job whose first attempt failed on a shared device: evaluated again alone.
  struct Retry {
    Job job;
    std::string first_attempt;
  };
  void run_thread(size_t index);
  // Job `job`'s request on thread `index`'s device: its reference kept in `reference`, through
  // the device's gate, sharing the device with the device's other threads and their sessions
  // started ahead.
  eval::EvalRequest placed_request(size_t index, const Job& job, eval::ReferenceSlot& reference);
  // The reference session of `next`'s problem, started beside `job`'s evaluation where the
  // problems differ (loaded, and drawn within the device's share for work ahead), as kbv run's
  // device threads do; only the sessions of these two problems are kept.
  void start_reference_ahead(size_t index, const Job& job, const Job* next,
                             eval::ReferenceSlot& reference);
  // The first attempt: stored, or deferred for a retry alone.
  void evaluate_job(size_t index, const Job& job, eval::ReferenceSlot& reference,
                    std::shared_ptr<eval::CandidateWorker> prestarted, bool& healthy);
  void evaluate_alone(size_t index, const Retry& retry, eval::ReferenceSlot& reference,
                      bool& healthy);
  // The evaluation of `request`; nullopt when the job failed (its problem cannot be evaluated).
  std::optional<Result> evaluate(const Job& job, const eval::EvalRequest& request,
                                 const std::string& key);
  void store(size_t index, const Job& job, const std::string& key, const Result& result,
             double seconds, bool& healthy);
  void show(size_t index, const std::string& job, const std::string& problem);
  // Thread `index` leaves: its device failed a health check. The last to leave closes the queue
  // (new work gets 503 saying why; queued jobs wait for a restart) rather than let clients wait
  // for threads that are gone.
  void leave_unhealthy(size_t index);
  void log(const std::string& line) const;

  JobQueue& queue_;
  store::Store& db_;
  PoolSettings settings_;
  std::map<std::string, std::unique_ptr<eval::DeviceGate>> gates_;
  std::map<std::string, int> threads_on_;  // evaluations at once per device
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  schedule::AloneRetries<Retry> alone_;
  mutable std::mutex state_;
  double seconds_per_evaluation_ = 10.0;
};

}  // namespace kbv::serve
