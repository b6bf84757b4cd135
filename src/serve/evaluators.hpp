// What runs the service's queued jobs: one interface, and one implementation per kind in a small
// registry: "local" (evaluation threads on this machine's devices, serve/eval_pool.hpp) and
// "ray" (Ray tasks on a cluster's nodes, serve/ray_pool.hpp). The service (its routes, health
// and Retry-After) and the server (start, drain) see only this interface. Every kind takes jobs
// from the durable queue, stores each result in the results database under kbv run's key (the
// rows a local evaluation would write) and finishes the job, so a client cannot tell where an
// evaluation ran but from its result's environment.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "eval/eval_request.hpp"
#include "serve/build_ahead.hpp"
#include "serve/job_queue.hpp"
#include "store/store.hpp"

namespace kbv::serve {

// kbv serve --ray: the cluster and what each node's `kbv run` gets besides a job's settings.
struct RaySettings {
  std::string address;  // host:port of the head, or "auto"
  // Server-wide `kbv run` options for the nodes (--cache-dir, --work-dir, ...), as typed: paths
  // are the nodes'.
  std::vector<std::string> node_arguments;
  int attempts = 3;  // per batch: one whose node was lost is sent again, this often
};

struct PoolSettings {
  // The server's placement (build cache, work folder) and sandbox setting; a job brings its own
  // settings (device aside) and limits.
  eval::EvalRequest server;
  std::vector<std::string> devices;  // as --devices names them ("cpu,cpu" is two)
  int workers_per_device = 1;
  std::function<void(const std::string&)> log;
  BuildAhead* builds = nullptr;  // when set, an evaluation waits for its candidate's build
  RaySettings ray;
};

class Evaluators {
 public:
  virtual ~Evaluators() = default;

  // Starts taking jobs. Throws eval::UsageError when it cannot (a cluster it cannot reach).
  virtual void start() = 0;
  // Waits, once the queue is closed (SIGTERM's drain), until every job taken from it has been
  // finished (its result stored) or, when its evaluation was lost, queued again for the next
  // start.
  virtual void join() = 0;

  // Where evaluations run, for /v1/health: local {devices, workers, threads}; ray {cluster,
  // workers, in_flight}.
  virtual nlohmann::json health() const = 0;
  // Evaluations at once (threads, or the cluster's task slots), at least 1.
  virtual size_t capacity() const = 0;
  // Of those, the ones still taking work (a local thread ends when its device fails a health
  // check); /v1/health says "degraded" below capacity() and "unavailable" at none.
  virtual size_t live_workers() const { return capacity(); }
  // Seconds per evaluation lately (for Retry-After); a guess before the first one.
  virtual double recent_seconds_per_evaluation() const = 0;
  // For the line that says where the service listens: "2 evaluation threads on cpu,cpu".
  virtual std::string describe() const = 0;
};

struct EvaluatorsKind {
  std::string_view name;
  // Candidates are built on this machine ahead of evaluation (serve/build_ahead.hpp); on a
  // cluster each node builds its own.
  bool builds_here;
  std::unique_ptr<Evaluators> (*make)(JobQueue& queue, store::Store& db, PoolSettings settings);
};

// Every kind; the first is the default.
const std::vector<EvaluatorsKind>& evaluators_kinds();
// The kind of that name; throws eval::UsageError naming the kinds there are.
const EvaluatorsKind& evaluators_kind(std::string_view name);

// What every kind does alike with a job:

// The EvalRequest of a job on `device`: the job's settings and limits, the server's placement.
eval::EvalRequest job_request(const eval::EvalRequest& server, const Job& job,
                              const std::string& device);

// The store key of a job's result on `device` (kbv run's: problem, candidate, settings.key()).
std::string job_store_key(const eval::EvalRequest& server, const JobSpec& spec,
                          const std::string& problem_sha256, const std::string& candidate_sha256,
                          const std::string& device);

// The store row of a job's result: its run, its problem's name, and the level and problem id
// that a name like "level1/3_ReLU" says (kbv report groups by them).
store::RowInfo job_row_info(const std::string& key, const JobSpec& spec);

}  // namespace kbv::serve
