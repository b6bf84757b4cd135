// The service's evaluators on a Ray cluster ("ray" in serve/evaluators.hpp: kbv serve --ray
// ADDRESS). The queue, the database and the HTTP service stay on this machine; the evaluations
// run as Ray tasks on the cluster's nodes, each kbv's own engine (`kbv run` over the batch's
// files, with the node's build cache), as for `kbv run --ray` (schedule/ray_run.hpp).
//
// A dispatcher thread takes batches from the durable queue: the oldest job and the queued jobs
// of its problem with the same settings (up to 64, shared among the free task slots), so a node's
// reference session serves a batch of RL's samples of one problem. It takes no more batches than
// the cluster has task slots (a GPU each; a CPU on --device cpu): what waits stays in the durable
// queue, where later samples of a problem join their batch. Each batch goes to the Python driver
// (python/kbv/ray_serve.py, over ShardQueue) as a line on its standard input; a reader thread
// takes the driver's events: each row a node stored is stored here under the job's key with the
// job's row info and this machine's paths (the row a local evaluation writes) and the job is
// finished; a batch's keys that came back missing (its problem cannot be evaluated there, its
// node was lost too often) fail their jobs with the node's reason. A lost node's batch is sent
// again by the driver with what has not come back. When the driver itself dies, its jobs in
// flight are queued again and it is started again; the drain (join) waits for the jobs in
// flight, as the local threads finish theirs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "schedule/ray_driver.hpp"
#include "serve/evaluators.hpp"

namespace kbv::serve {

class RayPool final : public Evaluators {
 public:
  RayPool(JobQueue& queue, store::Store& db, PoolSettings settings);
  ~RayPool() override;
  RayPool(const RayPool&) = delete;
  RayPool& operator=(const RayPool&) = delete;

  // Starts the driver and waits until it is connected; throws eval::UsageError when it cannot
  // (no Ray here, no cluster there, no GPU on it for --device cuda).
  void start() override;
  void join() override;

  nlohmann::json health() const override;
  size_t capacity() const override;
  double recent_seconds_per_evaluation() const override;
  std::string describe() const override;

 private:
  struct Flight {  // a job on the cluster, by its store key
    Job job;
    std::string batch;
  };
  struct Batch {  // a batch on the cluster, by its name
    size_t jobs = 0, left = 0;
    std::string node;
    Clock::time_point sent;
  };
  enum class Link { Connecting, Ready, Down, Failed };

  void run_driver();  // the reader thread: the driver's life, its events, its restarts
  void dispatch();    // the dispatcher thread
  void send_batch(std::vector<Job> jobs);
  void take_line(const std::string& line, bool& ever_ready);
  void store_row(nlohmann::json row, const std::string& node);
  void give_up(const nlohmann::json& keys, const std::string& why, JobFailure failure);
  void resolved(const std::string& key);  // a flight's end, under lock_
  void requeue_flights(const std::string& why);
  void set_cluster(const nlohmann::json& cluster);  // under lock_
  std::string cluster_words() const;                // "2 nodes (8 GPUs, 64 CPUs)", under lock_
  std::vector<std::string> node_arguments(const Job& job) const;
  void log(const std::string& line) const;

  JobQueue& queue_;
  store::Store& db_;
  PoolSettings settings_;
  std::string device_;  // the nodes' device, cuda or cpu: also the kind in the store key

  mutable std::mutex lock_;
  std::condition_variable changed_;
  // Under lock_:
  schedule::RayDriverProcess* driver_ = nullptr;  // the reader thread's, while it runs
  Link link_ = Link::Connecting;
  std::string failure_;  // why it could not connect
  nlohmann::json cluster_ = nlohmann::json::object();
  size_t slots_ = 0;                       // batches at once (the cluster's task slots)
  std::map<std::string, Flight> flights_;  // by store key
  std::map<std::string, Batch> batches_;   // by name
  std::set<std::string> unplanned_;        // keys of rows no job asked for (said once)
  bool stopping_ = false;
  size_t batches_sent_ = 0;
  double seconds_per_evaluation_ = 10.0;

  std::thread reader_, dispatcher_;
};

// The `kbv run` options that give a node's run a job's settings and limits (protocol, size,
// draws, timing, sandbox, timeouts), so that it keys its result as this service does.
std::vector<std::string> run_arguments(const eval::EvalSettings& settings,
                                       const eval::EvalLimits& limits);

// A batch as the driver takes it (a shard of kbv run --ray's plan with its name and options):
// the problem's file and, per job, its store key and candidate file, laid out on the node as
// problems/<name>.py and candidates/<index>_<job id>/<name>.py (kbv run's plain layout, in the
// batch's order).
nlohmann::json batch_shard(const std::vector<Job>& jobs, const std::vector<std::string>& keys,
                           const std::string& name, const std::vector<std::string>& node_arguments);

}  // namespace kbv::serve
