#include "serve/job_queue.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "core/hash.hpp"
#include "eval/workspace.hpp"
#include "store/statement.hpp"

namespace kbv::serve {

namespace fs = std::filesystem;
using nlohmann::json;
using store::Statement;

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL,
  options TEXT NOT NULL,
  problem_sha256 TEXT NOT NULL,
  candidate_sha256 TEXT NOT NULL,
  problem_file TEXT NOT NULL,
  candidate_file TEXT NOT NULL,
  store_key TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  failure TEXT NOT NULL DEFAULT 'request',
  from_store INTEGER NOT NULL DEFAULT 0,
  submitted_at REAL NOT NULL,
  finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (status, problem_sha256, seq);
)sql";

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

JobStatus parse_status(const std::string& s) {
  if (s == "queued") return JobStatus::Queued;
  if (s == "running") return JobStatus::Running;
  if (s == "done") return JobStatus::Done;
  return JobStatus::Failed;
}

// Written whole or not at all (a crash mid-write must not leave a truncated source that a
// restart would evaluate), and synced before the job that names it is committed.
void write_file_durably(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += fmt::format(".tmp{}", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string());
  size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + tmp.string());
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  fs::rename(tmp, path);
}

}  // namespace

std::string_view to_string(JobStatus status) {
  switch (status) {
    case JobStatus::Queued:
      return "queued";
    case JobStatus::Running:
      return "running";
    case JobStatus::Done:
      return "done";
    case JobStatus::Failed:
      return "failed";
  }
  return "failed";
}

std::string_view to_string(JobFailure failure) {
  return failure == JobFailure::Service ? "service" : "request";
}

std::string new_job_id() { return eval::random_secret().substr(0, 32); }

JobQueue::JobQueue(const fs::path& folder, const RequestPolicy& policy, size_t max_queued)
    : folder_(folder), policy_(policy), max_queued_(max_queued) {
  fs::create_directories(folder_);
  const fs::path path = folder_ / "jobs.sqlite";
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error(fmt::format("cannot open the job queue {}: {}", path.string(), why));
  }
  sqlite3_busy_timeout(db_, 10000);
  // FULL: a job answered 202 is on disk even if the machine loses power right after.
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  exec(kSchema);
  // A queue from before failures had an owner: the column added, its failed jobs the request's
  // (the only kind then recorded apart from storage faults, whose text says so).
  bool has_failure = false;
  {
    Statement columns(db_, "SELECT name FROM pragma_table_info('jobs')");
    while (columns.step()) has_failure = has_failure || columns.text(0) == "failure";
  }
  if (!has_failure) exec("ALTER TABLE jobs ADD COLUMN failure TEXT NOT NULL DEFAULT 'request'");
  // Jobs a stopped server was running were not finished (their result was not recorded): they
  // run again. An evaluation is idempotent by its store key, so one that did finish and was
  // stored is answered from the store when taken.
  exec("UPDATE jobs SET status = 'queued' WHERE status = 'running'");
  Statement count(db_, "SELECT COUNT(*) FROM jobs WHERE status = 'queued'");
  count.step();
  queued_ = count.integer_or_null(0).get<size_t>();
}

JobQueue::~JobQueue() { sqlite3_close(db_); }

void JobQueue::exec(const char* sql) const {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error("job queue: " + message);
  }
}

fs::path JobQueue::write_source(const std::string& kind, const std::string& sha,
                                const std::string& name, const std::string& text) {
  // Relative to the folder, so the folder may move with its database.
  fs::path relative = kind == "problems" ? fs::path("sources/problems") / sha / (name + ".py")
                                         : fs::path("sources/candidates") / (sha + ".py");
  const fs::path full = folder_ / relative;
  if (!fs::exists(full)) write_file_durably(full, text);
  return relative;
}

std::vector<std::string> JobQueue::submit(const std::vector<NewJob>& jobs) {
  std::unique_lock lock(mutex_);
  if (closed_) throw Draining(closed_why_);
  size_t waiting = 0;
  for (const auto& j : jobs) waiting += j.from_store ? 0 : 1;
  if (waiting > max_queued_) {
    throw LargerThanQueue(fmt::format(
        "{} evaluations at once, more than this server ever queues ({}): send at most {} at a "
        "time (--max-queue sets the limit)",
        waiting, max_queued_, max_queued_));
  }
  if (queued_ + waiting > max_queued_) {
    throw QueueFull(fmt::format("the queue is full: {} waiting, {} more asked, at most {}", queued_,
                                waiting, max_queued_));
  }
  std::vector<std::string> ids;
  exec("BEGIN IMMEDIATE");
  try {
    Statement insert(db_,
                     "INSERT INTO jobs (id, status, options, problem_sha256, candidate_sha256, "
                     "problem_file, candidate_file, store_key, from_store, submitted_at, "
                     "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const auto& j : jobs) {
      const std::string problem_sha = sha256_hex(j.spec.problem_source);
      const std::string candidate_sha = sha256_hex(j.spec.candidate_source);
      // The file's stem is the problem's name in results (level1/3_ReLU keeps "3_ReLU").
      const std::string stem = fs::path(j.spec.problem_name).filename().string();
      auto problem_file = write_source("problems", problem_sha, stem, j.spec.problem_source);
      auto candidate_file = write_source("candidates", candidate_sha, "", j.spec.candidate_source);
      const std::string id = new_job_id();
      const double now = now_s();
      insert.bind(1, id);
      insert.bind(2, std::string(j.from_store ? "done" : "queued"));
      insert.bind(3, j.spec.options_json().dump());
      insert.bind(4, problem_sha);
      insert.bind(5, candidate_sha);
      insert.bind(6, problem_file.string());
      insert.bind(7, candidate_file.string());
      insert.bind(8, j.store_key);
      insert.bind(9, std::optional<int>(j.from_store ? 1 : 0));
      insert.bind_number(10, now);
      insert.bind_number(11, j.from_store ? json(now) : json(nullptr));
      insert.step();
      insert.reset();
      ids.push_back(id);
    }
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
  queued_ += waiting;
  changed_.notify_all();
  return ids;
}

std::vector<Job> JobQueue::read_jobs(const std::string& where, const std::string& arg,
                                     const std::string& arg2) const {
  Statement select(
      db_, ("SELECT id, status, options, problem_sha256, candidate_sha256, "
            "problem_file, candidate_file, store_key, error, from_store, failure FROM jobs " +
            where)
               .c_str());
  if (!arg.empty()) select.bind(1, arg);
  if (!arg2.empty()) select.bind(2, arg2);
  std::vector<Job> jobs;
  while (select.step()) {
    Job job;
    job.id = select.text(0);
    job.status = parse_status(select.text(1));
    job.spec = JobSpec::from_options(json::parse(select.text(2)), policy_);
    job.problem_sha256 = select.text(3);
    job.candidate_sha256 = select.text(4);
    job.problem_file = folder_ / select.text(5);
    job.candidate_file = folder_ / select.text(6);
    job.store_key = select.text(7);
    job.error = select.text(8);
    job.from_store = select.integer_or_null(9) == 1;
    job.failure = select.text(10) == "service" ? JobFailure::Service : JobFailure::Request;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::optional<Job> JobQueue::read_job(const std::string& where, const std::string& arg) const {
  auto jobs = read_jobs(where, arg);
  if (jobs.empty()) return std::nullopt;
  return std::move(jobs.front());
}

std::optional<Job> JobQueue::next_job(const std::string& prefer_problem_sha256,
                                      const std::string& taker) const {
  // Enough rows in order that one is not reserved by another taker, if any such is queued.
  auto jobs = read_jobs(fmt::format("WHERE status = 'queued' AND store_key NOT IN "
                                    "(SELECT store_key FROM jobs WHERE status = 'running') "
                                    "ORDER BY (problem_sha256 = ?1) DESC, seq LIMIT {}",
                                    reserved_.size() + 1),
                        prefer_problem_sha256.empty() ? std::string("-") : prefer_problem_sha256);
  if (jobs.empty()) return std::nullopt;
  if (auto own = reserved_.find(taker); !taker.empty() && own != reserved_.end()) {
    for (auto& job : jobs) {
      if (job.id == own->second) return std::move(job);
    }
  }
  const auto others = [&](const Job& job) {
    return std::any_of(reserved_.begin(), reserved_.end(),
                       [&](const auto& r) { return r.first != taker && r.second == job.id; });
  };
  for (auto& job : jobs) {
    if (!others(job)) return std::move(job);
  }
  return std::move(jobs.front());  // only others' reservations are left: taken, not waited for
}

std::optional<Job> JobQueue::peek(const std::string& prefer_problem_sha256,
                                  const std::string& taker) {
  std::unique_lock lock(mutex_);
  if (closed_) return std::nullopt;
  if (!taker.empty()) reserved_.erase(taker);
  auto job = next_job(prefer_problem_sha256, taker);
  if (job && !taker.empty()) reserved_[taker] = job->id;
  return job;
}

void JobQueue::forget(const std::string& taker) {
  std::lock_guard lock(mutex_);
  reserved_.erase(taker);
}

std::optional<Job> JobQueue::wait_for_next(std::unique_lock<std::mutex>& lock,
                                           const std::string& prefer_problem_sha256,
                                           const std::string& taker) {
  while (true) {
    changed_.wait(lock, [&] { return closed_ || queued_ > 0; });
    if (closed_) return std::nullopt;
    // The preferred problem's oldest job first, then the oldest of all; a job whose twin (same
    // store key: RL resamples identical completions) is being evaluated waits for it, and is then
    // answered from the store instead of being evaluated twice at once.
    if (auto job = next_job(prefer_problem_sha256, taker)) return job;
    if (running_ == 0) {
      queued_ = 0;  // out of step with the table (cannot happen): resynchronised
      continue;
    }
    changed_.wait(lock);  // every queued job waits for its twin: until a job finishes
  }
}

void JobQueue::mark_running(std::vector<Job>& jobs) {
  exec("BEGIN IMMEDIATE");
  try {
    Statement update(db_, "UPDATE jobs SET status = 'running' WHERE id = ?");
    for (auto& job : jobs) {
      update.bind(1, job.id);
      update.step();
      update.reset();
      job.status = JobStatus::Running;
    }
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
  queued_ -= std::min(queued_, jobs.size());
  running_ += jobs.size();
  changed_.notify_all();
}

std::optional<Job> JobQueue::take(const std::string& prefer_problem_sha256,
                                  const std::string& taker) {
  std::unique_lock lock(mutex_);
  auto job = wait_for_next(lock, prefer_problem_sha256, taker);
  if (!job) return std::nullopt;
  // Whoever reserved it (this taker, or another whose claim was passed over) has it no more.
  if (!taker.empty()) reserved_.erase(taker);
  std::erase_if(reserved_, [&](const auto& r) { return r.second == job->id; });
  std::vector<Job> taken{std::move(*job)};
  mark_running(taken);
  return std::move(taken.front());
}

std::vector<Job> JobQueue::take_batch(
    size_t max, const std::function<size_t()>& takers,
    const std::function<bool(const Job& first, const Job& other)>& together) {
  std::unique_lock lock(mutex_);
  auto first = wait_for_next(lock, "", "");
  if (!first) return {};
  const size_t among = std::max<size_t>(1, takers());
  const size_t share = (queued_ + among - 1) / among;
  max = std::clamp<size_t>(share, 1, std::max<size_t>(1, max));
  std::vector<Job> batch{std::move(*first)};
  std::set<std::string> keys{batch.front().store_key};
  if (max > 1) {
    for (auto& other : read_jobs(
             "WHERE status = 'queued' AND problem_sha256 = ?1 AND id != ?2 AND store_key NOT IN "
             "(SELECT store_key FROM jobs WHERE status = 'running') ORDER BY seq",
             batch.front().problem_sha256, batch.front().id)) {
      if (batch.size() >= max) break;
      if (keys.count(other.store_key) || !together(batch.front(), other)) continue;
      keys.insert(other.store_key);
      batch.push_back(std::move(other));
    }
  }
  mark_running(batch);
  return batch;
}

void JobQueue::requeue(const std::vector<std::string>& ids) {
  std::unique_lock lock(mutex_);
  Statement update(db_, "UPDATE jobs SET status = 'queued' WHERE id = ? AND status = 'running'");
  for (const auto& id : ids) {
    update.bind(1, id);
    update.step();
    if (sqlite3_changes(db_) > 0) {
      ++queued_;
      if (running_ > 0) --running_;
    }
    update.reset();
  }
  changed_.notify_all();
}

void JobQueue::finish(const std::string& id, JobStatus status, const std::string& store_key,
                      const std::string& error, bool from_store, JobFailure failure) {
  std::unique_lock lock(mutex_);
  Statement update(db_,
                   "UPDATE jobs SET status = ?, error = ?, from_store = ?, finished_at = ?, "
                   "store_key = ?, failure = ? WHERE id = ? AND status = 'running'");
  update.bind(1, std::string(to_string(status)));
  update.bind(2, error);
  update.bind(3, std::optional<int>(from_store ? 1 : 0));
  update.bind_number(4, now_s());
  update.bind(5, store_key);
  update.bind(6, std::string(to_string(failure)));
  update.bind(7, id);
  update.step();
  if (sqlite3_changes(db_) > 0 && running_ > 0) --running_;
  changed_.notify_all();
}

std::optional<Job> JobQueue::get(const std::string& id) const {
  std::unique_lock lock(mutex_);
  return read_job("WHERE id = ?1", id);
}

std::optional<Job> JobQueue::wait(const std::string& id,
                                  std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  while (true) {
    auto job = read_job("WHERE id = ?1", id);
    if (!job || job->status == JobStatus::Done || job->status == JobStatus::Failed) return job;
    if (closed_ && job->status == JobStatus::Queued) return job;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      return read_job("WHERE id = ?1", id);
    }
  }
}

void JobQueue::close(const std::string& why) {
  std::unique_lock lock(mutex_);
  if (!closed_) closed_why_ = why;
  closed_ = true;
  changed_.notify_all();
}

bool JobQueue::closed() const {
  std::unique_lock lock(mutex_);
  return closed_;
}

size_t JobQueue::queued() const {
  std::unique_lock lock(mutex_);
  return queued_;
}

std::vector<std::string> JobQueue::queued_ids() const {
  std::unique_lock lock(mutex_);
  Statement select(db_, "SELECT id FROM jobs WHERE status = 'queued' ORDER BY seq");
  std::vector<std::string> ids;
  while (select.step()) ids.push_back(select.text(0));
  return ids;
}

size_t JobQueue::running() const {
  std::unique_lock lock(mutex_);
  return running_;
}

}  // namespace kbv::serve
