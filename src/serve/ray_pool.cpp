#include "serve/ray_pool.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "schedule/resume.hpp"
#include "store/ingest.hpp"

namespace kbv::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Jobs in one batch at most: a batch holds its node until its last job is done, and the
// problems queued behind it wait for a free node (as kMaxStreak bounds a local thread's run).
constexpr size_t kMaxBatch = 64;
// After the driver died: the wait before it is started again (the head may be restarting).
constexpr auto kRestartDelay = std::chrono::seconds(5);

json optional_json(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

std::string plural(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

std::vector<std::string> run_arguments(const eval::EvalSettings& settings,
                                       const eval::EvalLimits& limits) {
  // Every field of EvalSettings::key() but the device (the task's) and kbv's version (the
  // node's, which must be this one's: the driver reports rows under other keys). `audit` is kbv
  // audit's own, never a request's.
  std::vector<std::string> args = {"--protocol", settings.protocol,
                                   "--size",     settings.size,
                                   "--draws",    std::to_string(settings.hidden_draws),
                                   "--profile",  settings.timing_profile};
  if (settings.timing_samples > 0) {
    args.insert(args.end(), {"--samples", std::to_string(settings.timing_samples)});
  }
  if (settings.timing_rounds > 0) {
    args.insert(args.end(), {"--rounds", std::to_string(settings.timing_rounds)});
  }
  if (!settings.measure) args.push_back("--no-timing");
  if (settings.allow_library) args.push_back("--allow-library");
  if (!settings.sandbox) args.push_back("--no-sandbox");
  args.insert(args.end(), {"--timeout", std::to_string(limits.call_timeout.count()),
                           "--compile-timeout", std::to_string(limits.compile_timeout.count())});
  return args;
}

json batch_shard(const std::vector<Job>& jobs, const std::vector<std::string>& keys,
                 const std::string& name, const std::vector<std::string>& node_arguments) {
  // The file's name is the problem's in results (problem.name), as the queue stored it.
  const std::string file = jobs.front().problem_file.filename().string();
  json tasks = json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    // kbv run on the node evaluates its candidates in path order: the batch's, oldest first.
    tasks.push_back({{"key", keys[i]},
                     {"path", fs::absolute(jobs[i].candidate_file).string()},
                     {"relative", fmt::format("{:03}_{}/{}", i, jobs[i].id, file)}});
  }
  return {
      {"name", name},
      {"problem", {{"path", fs::absolute(jobs.front().problem_file).string()}, {"relative", file}}},
      {"node_arguments", node_arguments},
      {"tasks", tasks}};
}

RayPool::RayPool(JobQueue& queue, store::Store& db, PoolSettings settings)
    : queue_(queue),
      db_(db),
      settings_(std::move(settings)),
      device_(settings_.server.settings.cuda() ? "cuda" : "cpu") {}

RayPool::~RayPool() {
  queue_.close();
  join();
}

void RayPool::log(const std::string& line) const {
  if (settings_.log) settings_.log(line);
}

std::vector<std::string> RayPool::node_arguments(const Job& job) const {
  eval::EvalSettings settings = job.spec.settings;
  settings.sandbox = settings_.server.settings.sandbox;  // the operator's, as job_request's
  auto args = settings_.ray.node_arguments;
  for (auto& a : run_arguments(settings, job.spec.limits)) args.push_back(std::move(a));
  return args;
}

void RayPool::start() {
  reader_ = std::thread([this] { run_driver(); });
  std::unique_lock lock(lock_);
  changed_.wait(lock, [&] { return link_ == Link::Ready || link_ == Link::Failed; });
  if (link_ == Link::Failed) {
    const std::string why = failure_;
    lock.unlock();
    reader_.join();
    throw eval::UsageError(why);
  }
  lock.unlock();
  dispatcher_ = std::thread([this] { dispatch(); });
}

void RayPool::join() {
  {
    std::lock_guard guard(lock_);
    stopping_ = true;  // no more batches sent, no driver started again
    changed_.notify_all();
  }
  if (dispatcher_.joinable()) dispatcher_.join();
  {
    // The drain: every job in flight comes back (stored, failed, or queued again when the
    // driver died), then the driver's input ends and it ends.
    std::unique_lock lock(lock_);
    changed_.wait(lock, [&] { return flights_.empty() || slots_ == 0; });
    if (!flights_.empty() && driver_) {
      // No node left to run them (every node lost): Ray would hold them until one comes back.
      // They are queued again for the next start instead (the reader does it as the driver ends).
      log(fmt::format("the cluster has no node to finish {} in flight: the driver is stopped",
                      plural(flights_.size(), "job", "jobs")));
      driver_->kill();
    }
    changed_.wait(lock, [&] { return flights_.empty(); });
    // A connected driver ends at the end of its input; one still connecting (started again
    // after the last one died: the head may be gone) would wait for the cluster first.
    if (driver_ && link_ == Link::Ready) driver_->close_input();
    if (driver_ && link_ != Link::Ready) driver_->kill();
  }
  if (reader_.joinable()) reader_.join();
}

void RayPool::run_driver() {
  std::vector<std::string> arguments = {"--address",  settings_.ray.address,
                                        "--device",   device_,
                                        "--attempts", std::to_string(settings_.ray.attempts)};
  if (!settings_.log) arguments.push_back("--quiet");
  bool ever_ready = false;
  while (true) {
    std::unique_ptr<schedule::RayDriverProcess> driver;
    try {
      // Started here, on the thread that reads it and outlives it (its parent-death signal).
      driver = std::make_unique<schedule::RayDriverProcess>("kbv.ray_serve", arguments, true);
    } catch (const std::exception& error) {
      std::lock_guard guard(lock_);
      failure_ = fmt::format("cannot start the Ray driver: {}", error.what());
      link_ = ever_ready ? Link::Down : Link::Failed;
      changed_.notify_all();
      if (!ever_ready) return;
    }
    if (driver) {
      {
        std::lock_guard guard(lock_);
        driver_ = driver.get();
        if (stopping_) driver->close_input();  // the drain came first: it ends at once
      }
      std::string line;
      while (driver->next(line)) take_line(line, ever_ready);
      {
        std::lock_guard guard(lock_);
        driver_ = nullptr;
        slots_ = 0;
      }
      const int status = driver->wait();
      driver.reset();
      if (!ever_ready) {
        std::lock_guard guard(lock_);
        failure_ =
            status == 2 || status == 127
                ? "the Ray driver could not connect (above: why)"
                : fmt::format("the Ray driver ended with status {} before it connected", status);
        link_ = Link::Failed;
        changed_.notify_all();
        return;
      }
      requeue_flights(fmt::format("the Ray driver ended with status {}", status));
    }
    std::unique_lock lock(lock_);
    link_ = Link::Down;
    changed_.notify_all();
    if (stopping_) return;
    log(fmt::format("the Ray driver stopped; starting it again in {} s",
                    std::chrono::seconds(kRestartDelay).count()));
    if (changed_.wait_for(lock, kRestartDelay, [&] { return stopping_; })) return;
  }
}

std::string RayPool::cluster_words() const {
  return fmt::format("{} ({}, {})",
                     plural(cluster_.value("nodes", json::array()).size(), "node", "nodes"),
                     plural(cluster_.value("gpus", size_t{0}), "GPU", "GPUs"),
                     plural(cluster_.value("cpus", size_t{0}), "CPU", "CPUs"));
}

void RayPool::set_cluster(const json& cluster) {
  cluster_ = cluster;
  cluster_.erase("event");
  cluster_["address"] = settings_.ray.address;
  slots_ = cluster_.value("slots", 0);
  changed_.notify_all();
}

void RayPool::take_line(const std::string& line, bool& ever_ready) {
  const json event = json::parse(line, nullptr, false);
  if (event.is_discarded() || !event.is_object()) {
    log(fmt::format("ray driver: {}", line));  // not an event: shown, not lost
    return;
  }
  try {
    const std::string kind = event.value("event", "");
    if (kind == "ready" || kind == "cluster") {
      std::lock_guard guard(lock_);
      set_cluster(kind == "ready" ? event.at("cluster") : event);
      if (kind == "ready") {
        link_ = Link::Ready;
        ever_ready = true;
      }
      log(fmt::format("ray: the cluster at {} has {}: {} at once", settings_.ray.address,
                      cluster_words(), plural(slots_, "batch", "batches")));
    } else if (kind == "started") {
      std::lock_guard guard(lock_);
      if (auto b = batches_.find(event.value("shard", "")); b != batches_.end()) {
        b->second.node = event.value("node", "?");
      }
    } else if (kind == "row") {
      store_row(event.at("row"), event.value("node", "?"));
    } else if (kind == "missing") {
      // "fault": "problem" where the node's kbv could not evaluate the problem (the request's
      // fault); a lost node, a failed kbv or unreadable files are the service's.
      give_up(event.value("keys", json::array()), event.value("why", "no result came back"),
              event.value("fault", "") == "problem" ? JobFailure::Request : JobFailure::Service);
    }
  } catch (const json::exception& error) {
    log(fmt::format("ray driver: an event that cannot be read ({}): skipped", error.what()));
  }
}

void RayPool::store_row(json row, const std::string& node) {
  const std::string key = row.at("_row").value("key", "");
  std::optional<Flight> flight;
  {
    std::lock_guard guard(lock_);
    if (auto f = flights_.find(key); f != flights_.end()) {
      flight = f->second;
    } else if (unplanned_.insert(key).second) {
      // Keys are content keys over the files and settings, kbv's version included: a node whose
      // kbv differs stores keys no job has.
      log(
          fmt::format("a row from {} under key {} matches no job (is the node's kbv the same "
                      "version as this one?): not stored",
                      node, key.substr(0, 12)));
    }
  }
  if (!flight) return;
  const Job& job = flight->job;
  // The row a local evaluation writes: this service's row info and this machine's files (the
  // node evaluated its copies); the node's finish time is kept, as kbv merge keeps it.
  const auto info = job_row_info(key, job.spec);
  json& r = row["_row"];
  json stored_info = {{"key", key},
                      {"run", info.run},
                      {"problem", info.problem_name},
                      {"level", optional_json(info.level)},
                      {"problem_id", optional_json(info.problem_id)},
                      {"sample", nullptr}};
  if (r.contains("finished_at")) stored_info["finished_at"] = r["finished_at"];
  r = std::move(stored_info);
  if (row.contains("candidate") && row["candidate"].is_object()) {
    row["candidate"]["path"] = fs::absolute(job.candidate_file).string();
  }
  if (row.contains("problem") && row["problem"].is_object()) {
    row["problem"]["path"] = fs::absolute(job.problem_file).string();
  }
  try {
    // The job was sent because nothing usable was stored under its key (or what was stored is
    // evaluated again, as kbv run does): the new result replaces it.
    store::ingest_row(db_, row, /*evaluated_again=*/true);
    queue_.finish(job.id, JobStatus::Done, key);
    log(fmt::format("job {} ({}) on {}: {}", job.id, job.spec.problem_name, node,
                    row.value("verdict", "unknown")));
  } catch (const std::exception& error) {
    queue_.finish(job.id, JobStatus::Failed, key,
                  fmt::format("the result could not be stored: {}", error.what()),
                  /*from_store=*/false, JobFailure::Service);
  }
  std::lock_guard guard(lock_);
  resolved(key);
}

void RayPool::give_up(const json& keys, const std::string& why, JobFailure failure) {
  for (const auto& k : keys) {
    if (!k.is_string()) continue;
    const std::string key = k.get<std::string>();
    std::optional<Flight> flight;
    {
      std::lock_guard guard(lock_);
      if (auto f = flights_.find(key); f != flights_.end()) flight = f->second;
    }
    if (!flight) continue;
    // Its problem could not be evaluated on the node (the request's fault, as a local
    // evaluation's UsageError), or the cluster kept losing its node: the job says why.
    log(fmt::format("job {} ({}): not evaluated: {}", flight->job.id, flight->job.spec.problem_name,
                    why));
    queue_.finish(flight->job.id, JobStatus::Failed, key, why, /*from_store=*/false, failure);
    std::lock_guard guard(lock_);
    resolved(key);
  }
}

void RayPool::resolved(const std::string& key) {
  auto f = flights_.find(key);
  if (f == flights_.end()) return;
  auto b = batches_.find(f->second.batch);
  flights_.erase(f);
  if (b != batches_.end() && --b->second.left == 0) {
    const double per = seconds_since(b->second.sent) / static_cast<double>(b->second.jobs);
    seconds_per_evaluation_ = 0.8 * seconds_per_evaluation_ + 0.2 * per;
    batches_.erase(b);
  }
  changed_.notify_all();
}

void RayPool::requeue_flights(const std::string& why) {
  std::vector<std::string> ids;
  {
    std::lock_guard guard(lock_);
    for (const auto& [key, flight] : flights_) ids.push_back(flight.job.id);
    flights_.clear();
    batches_.clear();
    changed_.notify_all();
  }
  if (ids.empty()) return;
  // Their tasks died with the driver (Ray stops a dead driver's tasks): evaluated again when
  // taken again; a row stored meanwhile answers its job from the store.
  queue_.requeue(ids);
  log(fmt::format("{}: its {} in flight queued again", why, plural(ids.size(), "job", "jobs")));
}

void RayPool::dispatch() {
  // The slots free when the jobs are taken (not when the wait for them began: batches end
  // meanwhile). Called under the queue's lock; lock_ is never held while calling the queue.
  auto free_slots = [&] {
    std::lock_guard guard(lock_);
    return slots_ > batches_.size() ? slots_ - batches_.size() : size_t{1};
  };
  while (true) {
    {
      std::unique_lock lock(lock_);
      changed_.wait(
          lock, [&] { return stopping_ || (link_ == Link::Ready && batches_.size() < slots_); });
      if (stopping_) return;
    }
    // What waits, shared among the free slots: RL's many samples of one problem go to as many
    // nodes as are free, each batch on one warm reference session there.
    auto jobs = queue_.take_batch(kMaxBatch, free_slots, [&](const Job& first, const Job& other) {
      return other.problem_file == first.problem_file &&
             node_arguments(other) == node_arguments(first);
    });
    if (jobs.empty()) return;  // the queue closed
    send_batch(std::move(jobs));
  }
}

void RayPool::send_batch(std::vector<Job> jobs) {
  std::vector<Job> to_send;
  std::vector<std::string> keys;
  for (auto& job : jobs) {
    const std::string key = job_store_key(settings_.server, job.spec, job.problem_sha256,
                                          job.candidate_sha256, device_);
    // An identical job ahead of this one was evaluated meanwhile (or before a restart): its
    // stored result answers this one, as on one machine.
    if (auto stored = db_.get(key); stored && !schedule::evaluate_again(*stored, job.spec.limits)) {
      queue_.finish(job.id, JobStatus::Done, key, "", /*from_store=*/true);
      continue;
    }
    keys.push_back(key);
    to_send.push_back(std::move(job));
  }
  if (to_send.empty()) return;
  std::unique_lock lock(lock_);
  // Named in progress lines and in /v1/health; the driver adds how many jobs it holds.
  const std::string name =
      fmt::format("{} #{}", to_send.front().spec.problem_name, ++batches_sent_);
  const json line = {{"submit", batch_shard(to_send, keys, name, node_arguments(to_send.front()))}};
  for (size_t i = 0; i < to_send.size(); ++i) flights_[keys[i]] = {to_send[i], name};
  batches_[name] = {to_send.size(), to_send.size(), "", Clock::now()};
  if (link_ == Link::Ready && driver_ && driver_->send(line.dump())) return;
  // The driver died between the take and now: back to the queue, for its next start.
  std::vector<std::string> ids;
  for (size_t i = 0; i < to_send.size(); ++i) {
    flights_.erase(keys[i]);
    ids.push_back(to_send[i].id);
  }
  batches_.erase(name);
  changed_.notify_all();
  lock.unlock();
  queue_.requeue(ids);
}

json RayPool::health() const {
  std::lock_guard guard(lock_);
  json cluster = cluster_;
  cluster["address"] = settings_.ray.address;
  cluster["connected"] = link_ == Link::Ready;
  json in_flight = json::array();
  for (const auto& [name, batch] : batches_) {
    in_flight.push_back({{"batch", name},
                         {"jobs", batch.jobs},
                         {"left", batch.left},
                         {"node", batch.node.empty() ? json(nullptr) : json(batch.node)}});
  }
  return {{"cluster", cluster}, {"workers", slots_}, {"in_flight", in_flight}};
}

size_t RayPool::capacity() const {
  std::lock_guard guard(lock_);
  return std::max<size_t>(1, slots_);
}

double RayPool::recent_seconds_per_evaluation() const {
  std::lock_guard guard(lock_);
  return seconds_per_evaluation_;
}

std::string RayPool::describe() const {
  std::lock_guard guard(lock_);
  return fmt::format("Ray tasks on the cluster at {}: {}", settings_.ray.address, cluster_words());
}

}  // namespace kbv::serve
