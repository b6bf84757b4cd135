#include "serve/service.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/hash.hpp"
#include "core/result.hpp"
#include "schedule/resume.hpp"
#include "serve/reward.hpp"

namespace kbv::serve {

using nlohmann::json;

namespace {

Answer error_answer(int status, const std::string& message, int retry_after_s = 0) {
  return {status, {{"error", message}}, retry_after_s};
}

}  // namespace

Service::Service(RequestPolicy policy, JobQueue& queue, store::Store& db, Evaluators& pool,
                 eval::EvalRequest server, std::string key_device, ServiceLimits limits,
                 BuildAhead* builds)
    : policy_(std::move(policy)),
      queue_(queue),
      db_(db),
      pool_(pool),
      server_(std::move(server)),
      key_device_(std::move(key_device)),
      limits_(limits),
      builds_(builds) {}

void Service::build_ahead(const std::vector<std::string>& ids) {
  if (!builds_) return;
  for (const auto& id : ids) {
    auto job = queue_.get(id);
    if (job && job->status == JobStatus::Queued) {
      builds_->add(job->candidate_file, job->candidate_sha256);
    }
  }
}

std::vector<NewJob> Service::new_jobs(std::vector<JobSpec> specs) const {
  std::vector<NewJob> jobs;
  for (auto& spec : specs) {
    NewJob job;
    job.store_key = job_store_key(server_, spec, sha256_hex(spec.problem_source),
                                  sha256_hex(spec.candidate_source), key_device_);
    // Already evaluated (by this service or by kbv run into the same database): answered from
    // the store, as a rerun of kbv run skips it; a stored harness_error or a timeout under a
    // shorter timeout is evaluated again, as kbv run does.
    if (auto stored = db_.get(job.store_key)) {
      job.from_store = !schedule::evaluate_again(*stored, spec.limits);
    }
    job.spec = std::move(spec);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

int Service::retry_after_s() const {
  // The time the queue ahead takes to shrink by one job per thread, within [1, 60] s.
  const double per = pool_.recent_seconds_per_evaluation();
  const double threads = static_cast<double>(std::max<size_t>(1, pool_.capacity()));
  const double wait = per * static_cast<double>(std::max<size_t>(1, queue_.queued())) / threads;
  return static_cast<int>(std::clamp(std::ceil(wait), 1.0, 60.0));
}

template <typename Parse>
std::variant<std::vector<std::string>, Answer> Service::accept(Parse&& parse) {
  try {
    auto ids = queue_.submit(new_jobs(parse()));
    build_ahead(ids);
    return ids;
  } catch (const BadRequest& error) {
    return error_answer(400, error.what());
  } catch (const Draining& error) {
    return error_answer(503, error.what(), 10);
  } catch (const QueueFull& error) {
    return error_answer(429, error.what(), retry_after_s());
  } catch (const LargerThanQueue& error) {
    return error_answer(413, error.what());
  }
}

Answer Service::submit(const std::string& body, bool wait) {
  auto accepted = accept([&] { return std::vector<JobSpec>{parse_job_text(body, policy_)}; });
  if (auto* refused = std::get_if<Answer>(&accepted)) return std::move(*refused);
  const std::string id = std::get<std::vector<std::string>>(accepted).front();
  auto job = queue_.get(id);
  if (job && job->status == JobStatus::Done) return {200, job_json(*job)};
  if (!wait) return {202, {{"id", id}, {"status", "queued"}}};
  // A bounded number of connections wait, so waiting clients cannot take every HTTP thread
  // (health and status must still be answered); the others poll.
  if (waiting_.fetch_add(1) >= limits_.max_waiting) {
    waiting_.fetch_sub(1);
    return {202, {{"id", id}, {"status", "queued"}}, retry_after_s()};
  }
  job = queue_.wait(id, std::chrono::steady_clock::now() + limits_.max_wait);
  waiting_.fetch_sub(1);
  if (!job) return error_answer(500, "the job vanished from the queue");
  // A problem the reference cannot evaluate is the request's fault (400); a result kbv could not
  // store is its own (500): both with the failed job, whose `failure` says which.
  if (job->status == JobStatus::Failed) {
    return {job->failure == JobFailure::Request ? 400 : 500, job_json(*job)};
  }
  if (job->status == JobStatus::Done) return {200, job_json(*job)};
  // Not done within max_wait, or the service is draining with the job still queued (it runs
  // after the restart): the client polls its id.
  return {202, job_json(*job), retry_after_s()};
}

Answer Service::submit_batch(const std::string& body) {
  std::vector<BatchItem> items;
  try {
    items = parse_batch_text(body, policy_, limits_.max_batch);
  } catch (const BadRequest& error) {
    return error_answer(400, error.what());
  }
  // The requests refused one by one (an RL step's one malformed completion) cost only their own
  // place: the others are queued, and the answer names each refused one by its index.
  std::vector<JobSpec> specs;
  std::vector<size_t> places;
  json refused = json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].spec) {
      specs.push_back(std::move(*items[i].spec));
      places.push_back(i);
    } else {
      refused.push_back({{"index", i}, {"error", items[i].refused}});
    }
  }
  if (specs.empty()) {
    return {400,
            {{"error", fmt::format("every request of the batch was refused; request 0: {}",
                                   items.front().refused)},
             {"refused", refused}}};
  }
  auto accepted = accept([&] { return std::move(specs); });
  if (auto* answer = std::get_if<Answer>(&accepted)) return std::move(*answer);
  const auto& accepted_ids = std::get<std::vector<std::string>>(accepted);
  json ids(items.size(), nullptr);
  for (size_t k = 0; k < places.size(); ++k) ids[places[k]] = accepted_ids[k];
  json out = {{"ids", ids}};
  if (!refused.empty()) out["refused"] = refused;
  return {202, out};
}

json Service::job_json(const Job& job) const {
  json out = {{"id", job.id},
              {"status", to_string(job.status)},
              {"from_store", job.from_store},
              {"result", nullptr},
              {"reward", nullptr}};
  if (job.status == JobStatus::Failed) {
    out["error"] = job.error;
    out["failure"] = std::string(to_string(job.failure));
  }
  if (job.status == JobStatus::Done) {
    if (auto result = db_.get(job.store_key)) {
      out["reward"] = reward_of(*result);
      out["result"] = std::move(*result);
    } else {
      // The row is gone (the database was replaced under the service): say so rather than
      // answer a result that is not there.
      out["status"] = "failed";
      out["error"] = "the result is no longer in the results database";
      out["failure"] = "service";
    }
  }
  return out;
}

Answer Service::status(const std::string& id) const {
  auto job = queue_.get(id);
  if (!job) return error_answer(404, fmt::format("no evaluation {}", id));
  return {200, job_json(*job)};
}

Answer Service::health() const {
  // unavailable: no worker is left (every device failed its health check): new work gets 503
  // until a restart. degraded: some are gone, the others take the work.
  const size_t live = pool_.live_workers();
  const bool draining = queue_.closed();
  const char* status = live == 0                 ? "unavailable"
                       : draining                ? "draining"
                       : live < pool_.capacity() ? "degraded"
                                                 : "ok";
  const bool refusing = live == 0 || draining;
  json body = {
      {"status", status},
      {"version", std::string(kVersion)},
      {"queue",
       {{"queued", queue_.queued()}, {"running", queue_.running()}, {"max", queue_.max_queued()}}}};
  body.update(pool_.health());
  return {refusing ? 503 : 200, body, refusing ? 10 : 0};
}

void Service::drain() { queue_.close(); }

}  // namespace kbv::serve
