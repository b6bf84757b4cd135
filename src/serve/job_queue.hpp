// The service's durable queue: every accepted request is on disk before its id is answered, so a
// restart (after SIGTERM's drain, a crash, kill -9) loses nothing and resumes the queued work.
//
// Layout, in a folder next to the results database (`<db>.serve/`):
//   jobs.sqlite                   one row per job: id, status, the request's options, the two
//                                 sources' SHA-256, the store key of its result or its error
//   sources/problems/<sha>/<name>.py, sources/candidates/<sha>.py
//                                 the sources, by content: RL sends many samples of one problem,
//                                 stored once; the files are what the evaluation reads
// Results themselves go to the results database (store::Store) under the same key as kbv run's;
// a job only points at its row.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "serve/job_spec.hpp"

namespace kbv::serve {

enum class JobStatus { Queued, Running, Done, Failed };
std::string_view to_string(JobStatus status);

// More queued work than the queue takes (429).
class QueueFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The queue no longer accepts work: the service is draining (503).
class Draining : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// More jobs at once than the queue ever holds (413): waiting cannot help, the client must send
// fewer at a time.
class LargerThanQueue : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whose fault a failed job is: the request's (its problem cannot be evaluated; a waiting client
// gets 400) or the service's (its result could not be stored, its node kept failing: 500, and a
// resubmission evaluates it again, nothing having been stored).
enum class JobFailure { Request, Service };
std::string_view to_string(JobFailure failure);

struct Job {
  std::string id;
  JobStatus status = JobStatus::Queued;
  JobSpec spec;  // sources not loaded (they are the files below)
  std::string problem_sha256, candidate_sha256;
  std::filesystem::path problem_file, candidate_file;
  std::string store_key;  // where its result is (and was looked up before evaluating)
  std::string error;      // why it failed (a problem the reference could not load)
  JobFailure failure = JobFailure::Request;  // whose fault, when it failed
  bool from_store = false;  // answered from an earlier result, not evaluated for this request
};

// A job to add: its spec and its result's store key (computed by the caller, which knows the
// settings' device kind); `from_store` when that result exists already (the job is done).
struct NewJob {
  JobSpec spec;
  std::string store_key;
  bool from_store = false;
};

class JobQueue {
 public:
  // Opens (creating) the queue in `folder`; jobs left `running` by a server that stopped are
  // queued again. `policy` reads back the options of queued jobs. At most `max_queued` jobs wait.
  JobQueue(const std::filesystem::path& folder, const RequestPolicy& policy, size_t max_queued);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // Persists the sources and the jobs (one transaction, synced) and returns their ids, in order.
  // All or nothing: throws QueueFull when they do not all fit now, LargerThanQueue when they
  // never would, Draining once close() was called.
  std::vector<std::string> submit(const std::vector<NewJob>& jobs);

  // The next queued job, marked running: the oldest of `prefer_problem` when there is one (a
  // device thread keeps its reference session warm across a problem's samples), else the oldest;
  // never a job whose store key another running job has (it waits for that one's result).
  // Waits while nothing can be taken; nullopt once the queue is closed. A `taker` (a device
  // thread) gets the job it reserved with peek() first, and passes over jobs other takers
  // reserved while anything else can be taken (never waiting for one: it takes it then).
  std::optional<Job> take(const std::string& prefer_problem_sha256, const std::string& taker = "");

  // The oldest queued job and, with it, more queued jobs of its problem that `together(first,
  // other)` accepts (the same settings: one node's reference session serves them all), oldest
  // first, all marked running: at most `max`, and at most the queued jobs' share among the
  // `takers()` there are (rounded up; both counted once there is work, so a batch submitted at
  // once is shared whole among those free then). Never two jobs of one store key, nor one whose
  // key a running job has. Waits as take() does; empty once the queue is closed. `takers` is
  // called with the queue locked: it must not call the queue.
  std::vector<Job> take_batch(
      size_t max, const std::function<size_t()>& takers,
      const std::function<bool(const Job& first, const Job& other)>& together);

  // Taken jobs back to the queue, as a restart would put them (their evaluation was lost: the
  // process that ran it died). A job no longer running is left as it is.
  void requeue(const std::vector<std::string>& ids);

  // A taken job's end: done (its result is under `store_key`, the key its device's settings
  // give) or failed with `error`, `failure` saying whose fault that is.
  void finish(const std::string& id, JobStatus status, const std::string& store_key,
              const std::string& error = "", bool from_store = false,
              JobFailure failure = JobFailure::Request);

  // The job take() would give now, left queued (nullopt when none): its worker is started ahead.
  // With a `taker` the job is reserved for it (its former reservation let go): the other takers
  // pass it over, so that the worker started ahead for it is the one that evaluates it. Without
  // one, device threads all peeked at the same oldest job and all but one of the workers they
  // started ahead were stopped unused (the service's GRPO batch on the H100, session 21).
  std::optional<Job> peek(const std::string& prefer_problem_sha256, const std::string& taker = "");
  // A taker that stops lets its reservation go.
  void forget(const std::string& taker);

  std::optional<Job> get(const std::string& id) const;

  // Waits until the job is done or failed, the deadline passes, or the queue closes while the
  // job is still queued (it will not run before a restart). Returns the job as it is then.
  std::optional<Job> wait(const std::string& id, std::chrono::steady_clock::time_point deadline);

  // No more submissions (Draining, with `why`: the first close's) and no more takes; running
  // jobs still finish.
  void close(const std::string& why = "the service is draining: it accepts no new work");
  bool closed() const;

  size_t queued() const;
  std::vector<std::string> queued_ids() const;  // in submission order
  size_t running() const;
  size_t max_queued() const { return max_queued_; }

 private:
  void exec(const char* sql) const;
  std::optional<Job> read_job(const std::string& where, const std::string& arg) const;
  std::vector<Job> read_jobs(const std::string& where, const std::string& arg,
                             const std::string& arg2 = "") const;
  std::optional<Job> next_job(const std::string& prefer_problem_sha256,
                              const std::string& taker) const;
  // Under mutex_: waits until a job can be taken (the preferred problem's oldest, else the
  // oldest); nullopt once the queue is closed.
  std::optional<Job> wait_for_next(std::unique_lock<std::mutex>& lock,
                                   const std::string& prefer_problem_sha256,
                                   const std::string& taker);
  // Under mutex_: marks `jobs` running (one transaction).
  void mark_running(std::vector<Job>& jobs);
  std::filesystem::path write_source(const std::string& kind, const std::string& sha,
                                     const std::string& name, const std::string& text);

  std::filesystem::path folder_;
  RequestPolicy policy_;
  size_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  sqlite3* db_ = nullptr;
  size_t queued_ = 0, running_ = 0;
  bool closed_ = false;
  std::string closed_why_;
  // Taker -> the queued job it reserved (peek): in memory only, as the workers ahead are.
  std::map<std::string, std::string> reserved_;
};

// 128 random bits, hex: a job's id (unguessable, so one client cannot read another's results by
// counting).
std::string new_job_id();

}  // namespace kbv::serve
