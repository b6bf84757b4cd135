// What each route of kbv serve does, apart from HTTP: submit (one or a batch), a job's status
// and result, the service's health, the drain. Answers are a status code and a JSON body, so the
// HTTP layer (http_routes) only moves bytes and checks the token.
#pragma once

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "eval/eval_request.hpp"
#include "serve/evaluators.hpp"
#include "serve/job_queue.hpp"
#include "serve/job_spec.hpp"
#include "store/store.hpp"

namespace kbv::serve {

struct Answer {
  int status = 200;
  nlohmann::json body = nlohmann::json::object();
  int retry_after_s = 0;  // sent as Retry-After when > 0 (429, 503)
};

struct ServiceLimits {
  size_t max_batch = 1024;              // requests per POST /v1/batches
  std::chrono::seconds max_wait{3600};  // the longest ?wait=1 holds a connection
  int max_waiting = 32;                 // ?wait=1 requests held at once; more get 202
};

class Service {
 public:
  Service(RequestPolicy policy, JobQueue& queue, store::Store& db, Evaluators& pool,
          eval::EvalRequest server, std::string key_device, ServiceLimits limits,
          BuildAhead* builds = nullptr);

  // POST /v1/evaluations: 202 {id, status} (200 and the job when it is answered from the store),
  // or with `wait` 200 and the job once it is done (a failed job: 400 when its problem cannot be
  // evaluated, 500 when kbv could not store its result); 400 malformed, 413 more than the queue
  // ever holds, 429 queue full, 503 draining or no healthy device left.
  Answer submit(const std::string& body, bool wait);
  // POST /v1/batches: 202 {ids: [...], refused: [{index, error}]}: a request refused alone
  // (malformed) has a null id and its reason, the others are queued (together: 413, 429 and 503
  // refuse them all); 400 when the batch itself is malformed or every request is refused.
  Answer submit_batch(const std::string& body);
  // GET /v1/evaluations/{id}: {id, status, from_store, result, reward, error}; 404 unknown.
  Answer status(const std::string& id) const;
  // GET /v1/health: status (ok; degraded: a device failed its health check, the others work;
  // unavailable: none is left, 503; draining, 503), version, queue, and where evaluations run
  // (the evaluators': local devices and their threads, or the Ray cluster's nodes).
  Answer health() const;

  // At start: the queued jobs a stopped server left go to the builds ahead.
  void resume_builds() { build_ahead(queue_.queued_ids()); }

  // SIGTERM: no new work (503), queued jobs stay on disk for the next start.
  void drain();

 private:
  std::vector<NewJob> new_jobs(std::vector<JobSpec> specs) const;
  // Accepted jobs' candidates go to the builds ahead of evaluation.
  void build_ahead(const std::vector<std::string>& ids);
  // The one place a submission is accepted or refused: the specs `parse` gives, queued (and
  // sent to the builds ahead); their ids, or the refusal (400 malformed, 413 more than the queue
  // holds, 429 queue full, 503 draining).
  template <typename Parse>
  std::variant<std::vector<std::string>, Answer> accept(Parse&& parse);
  nlohmann::json job_json(const Job& job) const;
  int retry_after_s() const;

  RequestPolicy policy_;
  JobQueue& queue_;
  store::Store& db_;
  Evaluators& pool_;
  eval::EvalRequest server_;
  std::string key_device_;  // the device whose kind keys results looked up at submission
  ServiceLimits limits_;
  BuildAhead* builds_;
  std::atomic<int> waiting_{0};
};

}  // namespace kbv::serve
