// The service's evaluation threads: per device, as many as --workers-per-device, each pulling
// jobs from the durable queue, evaluating them with the engine (eval::evaluate, sandboxed
// workers, the device's gate: one timing at a time per device) and storing each result in the
// results database as it finishes, under kbv run's key. Each thread keeps a ReferenceSlot and
// takes its current problem's jobs first, so RL's many samples of one problem reuse one warm
// reference session (its worker, its drawn cases and golden outputs).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "eval/device_gate.hpp"
#include "eval/eval_request.hpp"
#include "serve/build_ahead.hpp"
#include "serve/job_queue.hpp"
#include "store/store.hpp"

namespace kbv::serve {

struct PoolSettings {
  // The server's placement (build cache, work folder) and sandbox setting; a job brings its own
  // settings (device aside) and limits.
  eval::EvalRequest server;
  std::vector<std::string> devices;  // as --devices names them ("cpu,cpu" is two)
  int workers_per_device = 1;
  std::function<void(const std::string&)> log;
  BuildAhead* builds = nullptr;  // when set, an evaluation waits for its candidate's build
};

// The EvalRequest of a job on `device`: the job's settings and limits, the server's placement.
eval::EvalRequest job_request(const eval::EvalRequest& server, const Job& job,
                              const std::string& device);

// The store key of a job's result on `device` (kbv run's: problem, candidate, settings.key()).
std::string job_store_key(const eval::EvalRequest& server, const JobSpec& spec,
                          const std::string& problem_sha256, const std::string& candidate_sha256,
                          const std::string& device);

class EvalPool {
 public:
  EvalPool(JobQueue& queue, store::Store& db, PoolSettings settings);
  ~EvalPool();
  EvalPool(const EvalPool&) = delete;
  EvalPool& operator=(const EvalPool&) = delete;

  void start();
  // Waits for every thread; they end once the queue is closed and their evaluation in flight
  // has finished and been stored (SIGTERM's drain), or when their device fails a health check.
  void join();

  // Per thread: its device, and the job it evaluates (null when idle).
  nlohmann::json threads_json() const;
  size_t thread_count() const { return slots_.size(); }
  // Seconds per evaluation lately (for Retry-After); a guess before the first one.
  double recent_seconds_per_evaluation() const;

 private:
  struct Slot {
    std::string device;
    std::string job;  // under state_
    std::string problem;
  };
  void run_thread(size_t index);
  void evaluate_job(size_t index, const Job& job, eval::ReferenceSlot& reference,
                    std::shared_ptr<eval::CandidateWorker> prestarted, bool& healthy);
  void log(const std::string& line) const;

  JobQueue& queue_;
  store::Store& db_;
  PoolSettings settings_;
  std::map<std::string, std::unique_ptr<eval::DeviceGate>> gates_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  mutable std::mutex state_;
  double seconds_per_evaluation_ = 10.0;
};

}  // namespace kbv::serve
