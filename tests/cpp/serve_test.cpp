// kbv serve's pure parts: the token check, request validation (each reason for a 400), the
// durable queue (persisted before the id is answered, resumed after a restart, grouped by
// problem), and the reward components of a result.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "eval/eval_request.hpp"
#include "serve/auth.hpp"
#include "serve/job_queue.hpp"
#include "serve/job_spec.hpp"
#include "serve/ray_pool.hpp"
#include "serve/reward.hpp"
#include "serve/service.hpp"
#include "store/store.hpp"

namespace {

namespace fs = std::filesystem;
using kbv::serve::BadRequest;
using kbv::serve::JobQueue;
using kbv::serve::JobStatus;
using kbv::serve::NewJob;
using kbv::serve::RequestPolicy;
using nlohmann::json;

const char* kProblem = R"(import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(4, 4)]

def get_init_inputs():
    return []
)";

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::path(testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// --- auth ------------------------------------------------------------------------------------

TEST(ServeAuth, TokensCompareByContent) {
  EXPECT_TRUE(kbv::serve::tokens_equal("s3cret-token", "s3cret-token"));
  EXPECT_FALSE(kbv::serve::tokens_equal("s3cret-token", "s3cret-tokeN"));
  EXPECT_FALSE(kbv::serve::tokens_equal("s3cret-token", "s3cret"));
  EXPECT_FALSE(kbv::serve::tokens_equal("s3cret-token", "s3cret-token-and-more"));
  EXPECT_FALSE(kbv::serve::tokens_equal("s3cret-token", ""));
  EXPECT_FALSE(kbv::serve::tokens_equal("", ""));  // no token configured matches nothing
}

TEST(ServeAuth, BearerHeaderIsParsed) {
  EXPECT_EQ(kbv::serve::bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(kbv::serve::bearer_token("bearer   abc  "), "abc");
  EXPECT_EQ(kbv::serve::bearer_token("Basic abc"), std::nullopt);
  EXPECT_EQ(kbv::serve::bearer_token("Bearer"), std::nullopt);
  EXPECT_EQ(kbv::serve::bearer_token("Bearer "), std::nullopt);
  EXPECT_EQ(kbv::serve::bearer_token("Bearerabc"), std::nullopt);
  EXPECT_EQ(kbv::serve::bearer_token(""), std::nullopt);
  EXPECT_TRUE(kbv::serve::authorized("abc", "Bearer abc"));
  EXPECT_FALSE(kbv::serve::authorized("abc", "Bearer abd"));
  EXPECT_FALSE(kbv::serve::authorized("abc", ""));
}

TEST(ServeAuth, TokenFileMustExistAndHoldAToken) {
  auto dir = fresh_dir("serve_token");
  EXPECT_THROW(kbv::serve::read_token_file(dir / "absent"), kbv::eval::UsageError);
  std::ofstream(dir / "empty") << "  \n";
  EXPECT_THROW(kbv::serve::read_token_file(dir / "empty"), kbv::eval::UsageError);
  std::ofstream(dir / "token") << "  tok-123\n";
  EXPECT_EQ(kbv::serve::read_token_file(dir / "token"), "tok-123");
}

// --- request validation ------------------------------------------------------------------------

RequestPolicy policy() {
  RequestPolicy p;
  p.limits.call_timeout = std::chrono::seconds(60);
  p.limits.compile_timeout = std::chrono::seconds(300);
  p.max_source_bytes = 1000;
  return p;
}

json valid() { return {{"problem", kProblem}, {"candidate", "class ModelNew: pass\n"}}; }

// The reason of the BadRequest `body` raises (empty when it is accepted).
std::string refusal(const json& body) {
  try {
    kbv::serve::parse_job(body, policy());
    return "";
  } catch (const BadRequest& error) {
    return error.what();
  }
}

TEST(ServeRequest, AValidRequestGetsTheServerDefaultsAndItsOptions) {
  auto body = valid();
  auto spec = kbv::serve::parse_job(body, policy());
  EXPECT_EQ(spec.settings.protocol, "verified");
  EXPECT_EQ(spec.limits.call_timeout.count(), 60);
  body["protocol"] = "standard";
  body["draws"] = 2;
  body["no_timing"] = true;
  body["timeout"] = 5;
  body["problem_name"] = "level1/3_ReLU";
  body["allow_library"] = true;
  spec = kbv::serve::parse_job(body, policy());
  EXPECT_EQ(spec.settings.protocol, "standard");
  EXPECT_EQ(spec.settings.hidden_draws, 2);
  EXPECT_FALSE(spec.settings.measure);
  EXPECT_TRUE(spec.settings.allow_library);
  EXPECT_EQ(spec.limits.call_timeout.count(), 5);
  EXPECT_EQ(spec.problem_name, "level1/3_ReLU");
  // The queue's record reads back to the same spec.
  auto back = kbv::serve::JobSpec::from_options(spec.options_json(), policy());
  EXPECT_EQ(back.settings.key(), spec.settings.key());
  EXPECT_EQ(back.limits.call_timeout, spec.limits.call_timeout);
  EXPECT_EQ(back.problem_name, spec.problem_name);
}

TEST(ServeRequest, EachMalformedRequestIsRefusedWithItsReason) {
  auto with = [](const char* field, json value) {
    auto body = valid();
    body[field] = std::move(value);
    return body;
  };
  auto without = [](const char* field) {
    auto body = valid();
    body.erase(field);
    return body;
  };
  EXPECT_NE(refusal(json::array()).find("must be a JSON object"), std::string::npos);
  EXPECT_NE(refusal(with("colour", "red")).find("unknown field 'colour'"), std::string::npos);
  EXPECT_NE(refusal(without("problem")).find("'problem' is missing"), std::string::npos);
  EXPECT_NE(refusal(without("candidate")).find("'candidate' is missing"), std::string::npos);
  EXPECT_NE(refusal(with("candidate", 3)).find("'candidate' must be a string"), std::string::npos);
  EXPECT_NE(refusal(with("candidate", " \n")).find("'candidate' is empty"), std::string::npos);
  EXPECT_NE(refusal(with("candidate", std::string(2000, 'x'))).find("over this server's limit"),
            std::string::npos);
  EXPECT_NE(refusal(with("candidate", std::string("a\0b", 3))).find("NUL byte"), std::string::npos);
  EXPECT_NE(refusal(with("problem", "def get_inputs(): pass\ndef get_init_inputs(): pass\n"))
                .find("no module-level `class Model`"),
            std::string::npos);
  EXPECT_NE(refusal(with("problem", "class Model: pass\ndef get_init_inputs(): pass\n"))
                .find("`def get_inputs()`"),
            std::string::npos);
  EXPECT_NE(refusal(with("protocol", "fast")).find("'protocol' must be one of"), std::string::npos);
  EXPECT_NE(refusal(with("draws", 0)).find("'draws' must be between 1 and 100"), std::string::npos);
  EXPECT_NE(refusal(with("draws", "3")).find("'draws' must be an integer"), std::string::npos);
  EXPECT_NE(refusal(with("draws", 2.5)).find("'draws' must be an integer"), std::string::npos);
  EXPECT_NE(refusal(with("profile", "slow")).find("'profile' must be one of"), std::string::npos);
  EXPECT_NE(refusal(with("no_timing", 1)).find("'no_timing' must be true or false"),
            std::string::npos);
  EXPECT_NE(refusal(with("size", "huge")).find("'size' must be one of"), std::string::npos);
  // A request may not hold a device longer than the operator allows.
  EXPECT_NE(refusal(with("timeout", 61)).find("'timeout' must be between 1 and 60"),
            std::string::npos);
  EXPECT_NE(refusal(with("compile_timeout", 301)).find("between 1 and 300"), std::string::npos);
  EXPECT_NE(refusal(with("problem_name", "../../etc/passwd")).find("'problem_name' must be"),
            std::string::npos);
  EXPECT_NE(refusal(with("run", "/abs")).find("'run' must be"), std::string::npos);
}

TEST(ServeRequest, MalformedJsonAndBatchesAreRefused) {
  auto reason = [](auto&& call) {
    try {
      call();
      return std::string();
    } catch (const BadRequest& error) {
      return std::string(error.what());
    }
  };
  EXPECT_NE(reason([] { kbv::serve::parse_job_text("{\"problem\": ", policy()); }).find("not JSON"),
            std::string::npos);
  EXPECT_NE(reason([] { kbv::serve::parse_batch_text("[]", policy(), 10); }).find("empty"),
            std::string::npos);
  EXPECT_NE(reason([] {
              kbv::serve::parse_batch_text("{\"a\": 1}", policy(), 10);
            }).find("a batch must be a JSON list"),
            std::string::npos);
  json two = json::array({valid(), valid()});
  EXPECT_NE(reason([&] {
              kbv::serve::parse_batch_text(two.dump(), policy(), 1);
            }).find("over this server's limit of 1"),
            std::string::npos);
  two[1] = valid();
  EXPECT_EQ(kbv::serve::parse_batch_text(json{{"evaluations", two}}.dump(), policy(), 10).size(),
            2u);
}

// One malformed request of a batch (an RL step's broken completion) is refused alone, with its
// reason; the others are parsed as they would be on their own.
TEST(ServeRequest, ABatchsMalformedRequestIsRefusedAlone) {
  json batch = json::array({valid(), valid(), valid()});
  batch[1].erase("candidate");
  batch[2]["candidate"] = std::string("x = 1\0\n", 7);
  const auto items = kbv::serve::parse_batch_text(batch.dump(), policy(), 10);
  ASSERT_EQ(items.size(), 3u);
  ASSERT_TRUE(items[0].spec);
  EXPECT_TRUE(items[0].refused.empty());
  EXPECT_FALSE(items[1].spec);
  EXPECT_NE(items[1].refused.find("'candidate' is missing"), std::string::npos) << items[1].refused;
  EXPECT_FALSE(items[2].spec);
  EXPECT_NE(items[2].refused.find("NUL byte"), std::string::npos) << items[2].refused;
}

// --- the durable queue -----------------------------------------------------------------------

NewJob new_job(const std::string& problem_tail, const std::string& candidate) {
  NewJob job;
  job.spec = kbv::serve::parse_job(
      {{"problem", std::string(kProblem) + problem_tail}, {"candidate", candidate}}, policy());
  job.store_key = "key-" + candidate;
  return job;
}

TEST(ServeQueue, AcceptedJobsSurviveARestartAndRunningOnesRunAgain) {
  auto dir = fresh_dir("serve_queue_restart");
  std::vector<std::string> ids;
  {
    JobQueue queue(dir, policy(), 10);
    ids = queue.submit({new_job("", "a = 1\n"), new_job("", "b = 2\n"), new_job("", "c = 3\n")});
    ASSERT_EQ(ids.size(), 3u);
    auto first = queue.take("");
    ASSERT_TRUE(first);
    EXPECT_EQ(first->id, ids[0]);
    queue.finish(first->id, JobStatus::Done, first->store_key);
    auto second = queue.take("");
    ASSERT_TRUE(second);
    EXPECT_EQ(second->id, ids[1]);
    // The server stops here with the second job running and the third queued.
  }
  JobQueue queue(dir, policy(), 10);
  EXPECT_EQ(queue.queued(), 2u);
  EXPECT_EQ(queue.get(ids[0])->status, JobStatus::Done);
  EXPECT_EQ(queue.get(ids[1])->status, JobStatus::Queued);
  auto again = queue.take("");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, ids[1]);
  // The sources are files the evaluation reads, with the content submitted.
  std::ifstream candidate(again->candidate_file);
  std::string text((std::istreambuf_iterator<char>(candidate)), {});
  EXPECT_EQ(text, "b = 2\n");
  EXPECT_TRUE(fs::exists(again->problem_file));
  EXPECT_EQ(again->problem_file.filename(), "problem.py");
}

TEST(ServeQueue, TakesTheCurrentProblemsJobsFirst) {
  auto dir = fresh_dir("serve_queue_grouping");
  JobQueue queue(dir, policy(), 10);
  auto ids = queue.submit({new_job("# A\n", "a1 = 1\n"), new_job("# B\n", "b1 = 1\n"),
                           new_job("# A\n", "a2 = 1\n"), new_job("# B\n", "b2 = 1\n")});
  auto first = queue.take("");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, ids[0]);
  auto second = queue.take(first->problem_sha256);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->id, ids[2]);  // problem A's other sample, ahead of the older B
  EXPECT_EQ(queue.take(second->problem_sha256)->id, ids[1]);
}

TEST(ServeQueue, AJobWaitsWhileItsTwinIsEvaluated) {
  auto dir = fresh_dir("serve_queue_twins");
  JobQueue queue(dir, policy(), 10);
  auto ids = queue.submit(
      {new_job("", "same = 1\n"), new_job("", "same = 1\n"), new_job("", "other = 1\n")});
  auto first = queue.take("");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, ids[0]);
  auto next = queue.take(first->problem_sha256);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, ids[2]);  // the twin of the running job waits
  queue.finish(first->id, JobStatus::Done, first->store_key);
  auto twin = queue.take("");
  ASSERT_TRUE(twin);
  EXPECT_EQ(twin->id, ids[1]);  // now answered from the store by the pool
}

TEST(ServeQueue, AJobAThreadStartedAWorkerForIsLeftToIt) {
  auto dir = fresh_dir("serve_queue_reserved");
  JobQueue queue(dir, policy(), 10);
  auto ids = queue.submit({new_job("", "a = 1\n"), new_job("", "b = 1\n"), new_job("", "c = 1\n"),
                           new_job("", "d = 1\n")});
  auto first = queue.take("", "gpu#0");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, ids[0]);
  // Thread 0 starts a worker for the next job: reserved for it.
  auto ahead = queue.peek(first->problem_sha256, "gpu#0");
  ASSERT_TRUE(ahead);
  EXPECT_EQ(ahead->id, ids[1]);
  // Thread 1 peeks and takes past it (before, both peeked the same job and one worker was lost).
  EXPECT_EQ(queue.peek(first->problem_sha256, "gpu#1")->id, ids[2]);
  EXPECT_EQ(queue.take(first->problem_sha256, "gpu#1")->id, ids[2]);
  EXPECT_EQ(queue.take(first->problem_sha256, "gpu#2")->id, ids[3]);
  // Thread 0 finds its job; and where only another's reserved job is left, a taker takes it
  // rather than wait.
  EXPECT_EQ(queue.take(first->problem_sha256, "gpu#0")->id, ids[1]);
  auto more = queue.submit({new_job("", "e = 1\n")});
  EXPECT_EQ(queue.peek("", "gpu#0")->id, more[0]);
  EXPECT_EQ(queue.take("", "gpu#1")->id, more[0]);
  EXPECT_EQ(queue.queued(), 0u);
  // A thread that stops lets its reservation go; a taker without a name passes reservations too.
  auto last = queue.submit({new_job("", "f = 1\n"), new_job("", "g = 1\n")});
  EXPECT_EQ(queue.peek("", "gpu#3")->id, last[0]);
  EXPECT_EQ(queue.take("")->id, last[1]);
  queue.forget("gpu#3");
  EXPECT_EQ(queue.take("")->id, last[0]);
}

TEST(ServeQueue, AFullQueueRefusesAllOrNothingAndAClosedOneRefusesEverything) {
  auto dir = fresh_dir("serve_queue_full");
  JobQueue queue(dir, policy(), 2);
  queue.submit({new_job("", "x = 1\n")});
  EXPECT_THROW(queue.submit({new_job("", "y = 1\n"), new_job("", "z = 1\n")}),
               kbv::serve::QueueFull);
  EXPECT_EQ(queue.queued(), 1u);
  // A job answered from the store takes no place in the queue.
  auto known = new_job("", "w = 1\n");
  known.from_store = true;
  auto ids = queue.submit({new_job("", "y = 1\n"), known});
  EXPECT_EQ(queue.get(ids[1])->status, JobStatus::Done);
  EXPECT_EQ(queue.queued(), 2u);
  queue.close();
  EXPECT_THROW(queue.submit({new_job("", "v = 1\n")}), kbv::serve::Draining);
  EXPECT_FALSE(queue.take(""));   // a closed queue gives no more work
  EXPECT_EQ(queue.queued(), 2u);  // and loses none
}

// A batch that could never fit is told so (413 with the limit), not "full" (429): retrying it
// would wait forever.
TEST(ServeQueue, MoreJobsThanTheQueueEverHoldsIsNotAFullQueue) {
  auto dir = fresh_dir("serve_queue_larger");
  JobQueue queue(dir, policy(), 2);
  try {
    queue.submit({new_job("", "a = 1\n"), new_job("", "b = 1\n"), new_job("", "c = 1\n")});
    FAIL() << "three jobs fit a queue of two";
  } catch (const kbv::serve::LargerThanQueue& error) {
    EXPECT_NE(std::string(error.what()).find("send at most 2 at a time"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(queue.queued(), 0u);
  queue.submit({new_job("", "a = 1\n")});
  EXPECT_THROW(queue.submit({new_job("", "b = 1\n"), new_job("", "c = 1\n")}),
               kbv::serve::QueueFull);  // two fit an empty queue: later, not never
}

// A failed job says whose fault it is, across a restart; a queue written before the column
// existed opens with its failed jobs the request's.
TEST(ServeQueue, AFailuresOwnerIsKept) {
  auto dir = fresh_dir("serve_queue_failure");
  std::vector<std::string> ids;
  {
    JobQueue queue(dir, policy(), 10);
    ids = queue.submit({new_job("", "a = 1\n"), new_job("", "b = 1\n")});
    auto first = queue.take("");
    queue.finish(first->id, JobStatus::Failed, first->store_key, "cannot load the problem");
    auto second = queue.take("");
    queue.finish(second->id, JobStatus::Failed, second->store_key, "disk full",
                 /*from_store=*/false, kbv::serve::JobFailure::Service);
  }
  {
    JobQueue queue(dir, policy(), 10);
    EXPECT_EQ(queue.get(ids[0])->failure, kbv::serve::JobFailure::Request);
    EXPECT_EQ(queue.get(ids[1])->failure, kbv::serve::JobFailure::Service);
    EXPECT_EQ(queue.get(ids[1])->error, "disk full");
  }
  // The queue of an older kbv: no failure column.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "jobs.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE jobs DROP COLUMN failure", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  JobQueue queue(dir, policy(), 10);
  EXPECT_EQ(queue.get(ids[1])->failure, kbv::serve::JobFailure::Request);
  EXPECT_EQ(queue.get(ids[1])->status, JobStatus::Failed);
}

TEST(ServeQueue, AClosedQueueSaysWhy) {
  auto dir = fresh_dir("serve_queue_closed_why");
  JobQueue queue(dir, policy(), 10);
  queue.close("no healthy device is left");
  queue.close();  // the drain after it: the first reason stays
  try {
    queue.submit({new_job("", "a = 1\n")});
    FAIL() << "a closed queue took work";
  } catch (const kbv::serve::Draining& error) {
    EXPECT_EQ(std::string(error.what()), "no healthy device is left");
  }
}

TEST(ServeQueue, ABatchIsOneProblemsJobsThatGoTogether) {
  auto dir = fresh_dir("serve_queue_batch");
  JobQueue queue(dir, policy(), 10);
  auto other_settings = new_job("# A\n", "a4 = 1\n");
  other_settings.spec.settings.hidden_draws = 1;
  auto ids = queue.submit({new_job("# A\n", "a1 = 1\n"), new_job("# B\n", "b1 = 1\n"),
                           new_job("# A\n", "a2 = 1\n"), new_job("# A\n", "a1 = 1\n"),
                           other_settings, new_job("# A\n", "a3 = 1\n")});
  auto one = [] { return size_t{1}; };
  auto two = [] { return size_t{2}; };
  auto same_draws = [](const kbv::serve::Job& first, const kbv::serve::Job& other) {
    return other.spec.settings.hidden_draws == first.spec.settings.hidden_draws;
  };
  auto batch = queue.take_batch(3, one, same_draws);
  // The oldest job and its problem's others, oldest first: not B's, not the twin of a1 (one
  // key once), not the one of other settings; at most 3.
  std::vector<std::string> taken;
  for (const auto& job : batch) {
    taken.push_back(job.id);
    EXPECT_EQ(job.status, JobStatus::Running);
  }
  EXPECT_EQ(taken, (std::vector<std::string>{ids[0], ids[2], ids[5]}));
  EXPECT_EQ(queue.queued(), 3u);
  EXPECT_EQ(queue.running(), 3u);
  // A lost evaluation: back in the queue as a restart would put it; a finished job stays done.
  queue.finish(ids[0], JobStatus::Done, batch[0].store_key);
  queue.requeue({ids[0], ids[2]});
  EXPECT_EQ(queue.get(ids[0])->status, JobStatus::Done);
  EXPECT_EQ(queue.get(ids[2])->status, JobStatus::Queued);
  EXPECT_EQ(queue.queued(), 4u);
  EXPECT_EQ(queue.running(), 1u);
  // The twin of a1 now goes (a1 is done), with A's jobs of its settings.
  auto next = queue.take_batch(10, one, same_draws);
  std::vector<std::string> again;
  for (const auto& job : next) again.push_back(job.id);
  EXPECT_EQ(again, (std::vector<std::string>{ids[1]}));  // the oldest is B's, alone
  next = queue.take_batch(10, one, same_draws);
  again.clear();
  for (const auto& job : next) again.push_back(job.id);
  EXPECT_EQ(again, (std::vector<std::string>{ids[2], ids[3]}));
  // Shared among takers: 3 queued of one problem and settings, 2 takers: 2 now, then 1.
  queue.submit(
      {new_job("# C\n", "c1 = 1\n"), new_job("# C\n", "c2 = 1\n"), new_job("# C\n", "c3 = 1\n")});
  ASSERT_EQ(queue.take_batch(10, one, same_draws).size(), 1u);  // ids[4], the other settings
  EXPECT_EQ(queue.take_batch(10, two, same_draws).size(), 2u);
  EXPECT_EQ(queue.take_batch(10, two, same_draws).size(), 1u);
  queue.close();
  EXPECT_TRUE(queue.take_batch(10, one, same_draws).empty());
}

// --- kbv serve --ray: what a node's run is told -----------------------------------------------

TEST(ServeRay, ANodesRunGetsTheJobsSettingsAndLimits) {
  kbv::eval::EvalSettings settings;
  kbv::eval::EvalLimits limits;
  using Args = std::vector<std::string>;
  EXPECT_EQ(kbv::serve::run_arguments(settings, limits),
            (Args{"--protocol", "verified", "--size", "small", "--draws", "3", "--profile",
                  "standard", "--timeout", "120", "--compile-timeout", "900"}));
  settings.protocol = "standard";
  settings.timing_samples = 5;
  settings.timing_rounds = 2;
  settings.measure = false;
  settings.allow_library = true;
  settings.sandbox = false;
  limits.call_timeout = std::chrono::seconds(7);
  EXPECT_EQ(kbv::serve::run_arguments(settings, limits),
            (Args{"--protocol", "standard", "--size", "small", "--draws", "3", "--profile",
                  "standard", "--samples", "5", "--rounds", "2", "--no-timing", "--allow-library",
                  "--no-sandbox", "--timeout", "7", "--compile-timeout", "900"}));
}

TEST(ServeRay, ABatchIsAShardInKbvRunsPlainLayout) {
  auto dir = fresh_dir("serve_ray_shard");
  JobQueue queue(dir, policy(), 10);
  auto named = new_job("", "a = 1\n");
  named.spec.problem_name = "level1/3_ReLU";
  auto other = new_job("", "b = 1\n");
  other.spec.problem_name = "level1/3_ReLU";
  queue.submit({named, other});
  auto jobs = queue.take_batch(
      2, [] { return size_t{1}; }, [](const auto&, const auto&) { return true; });
  ASSERT_EQ(jobs.size(), 2u);
  auto shard = kbv::serve::batch_shard(jobs, {"k1", "k2"}, "level1/3_ReLU #1", {"--draws", "2"});
  EXPECT_EQ(shard["name"], "level1/3_ReLU #1");
  EXPECT_EQ(shard["problem"]["relative"], "3_ReLU.py");  // its name in results, as locally
  EXPECT_EQ(shard["problem"]["path"], fs::absolute(jobs[0].problem_file).string());
  EXPECT_EQ(shard["node_arguments"], json::array({"--draws", "2"}));
  ASSERT_EQ(shard["tasks"].size(), 2u);
  EXPECT_EQ(shard["tasks"][1]["key"], "k2");
  EXPECT_EQ(shard["tasks"][1]["relative"], "001_" + jobs[1].id + "/3_ReLU.py");
  EXPECT_EQ(shard["tasks"][1]["path"], fs::absolute(jobs[1].candidate_file).string());
}

// --- the service's answers ----------------------------------------------------------------------

// Evaluators that evaluate nothing: the service's answers to submissions and health alone.
class IdleEvaluators final : public kbv::serve::Evaluators {
 public:
  explicit IdleEvaluators(size_t capacity) : capacity_(capacity), live_(capacity) {}
  void start() override {}
  void join() override {}
  json health() const override { return {{"workers", live_}}; }
  size_t capacity() const override { return capacity_; }
  size_t live_workers() const override { return live_; }
  double recent_seconds_per_evaluation() const override { return 1.0; }
  std::string describe() const override { return "idle"; }
  size_t capacity_, live_;
};

struct ServiceFixture {
  explicit ServiceFixture(const std::string& name, size_t max_queue = 10)
      : dir(fresh_dir(name)),
        db(dir / "results.sqlite"),
        queue(dir / "queue", policy(), max_queue),
        pool(2),
        service(policy(), queue, db, pool, kbv::eval::EvalRequest{}, "cpu",
                kbv::serve::ServiceLimits{}) {}
  fs::path dir;
  kbv::store::Store db;
  JobQueue queue;
  IdleEvaluators pool;
  kbv::serve::Service service;
};

TEST(ServeService, ABatchQueuesItsGoodRequestsAndNamesTheRefusedOnes) {
  ServiceFixture f("serve_service_batch");
  json batch = json::array({valid(), valid(), valid()});
  batch[0]["candidate"] = "a = 1\n";
  batch[1]["candidate"] = std::string("b\0", 2);
  batch[2]["candidate"] = "c = 1\n";
  auto answer = f.service.submit_batch(batch.dump());
  ASSERT_EQ(answer.status, 202) << answer.body.dump();
  ASSERT_EQ(answer.body["ids"].size(), 3u);
  EXPECT_TRUE(answer.body["ids"][0].is_string());
  EXPECT_TRUE(answer.body["ids"][1].is_null());
  EXPECT_TRUE(answer.body["ids"][2].is_string());
  ASSERT_EQ(answer.body["refused"].size(), 1u);
  EXPECT_EQ(answer.body["refused"][0]["index"], 1);
  EXPECT_NE(answer.body["refused"][0]["error"].get<std::string>().find("NUL byte"),
            std::string::npos);
  EXPECT_EQ(f.queue.queued(), 2u);

  // Every request refused: the batch is (400), with each reason.
  json bad = json::array({batch[1], batch[1]});
  answer = f.service.submit_batch(bad.dump());
  EXPECT_EQ(answer.status, 400);
  EXPECT_EQ(answer.body["refused"].size(), 2u);
  EXPECT_NE(answer.body["error"].get<std::string>().find("every request of the batch"),
            std::string::npos);
  EXPECT_EQ(f.queue.queued(), 2u);
}

TEST(ServeService, ABatchLargerThanTheQueueIs413) {
  ServiceFixture f("serve_service_413", 2);
  json batch = json::array();
  for (const char* c : {"a = 1\n", "b = 1\n", "c = 1\n"}) {
    json r = valid();
    r["candidate"] = c;
    batch.push_back(r);
  }
  auto answer = f.service.submit_batch(batch.dump());
  EXPECT_EQ(answer.status, 413);
  EXPECT_EQ(answer.retry_after_s, 0);
  EXPECT_NE(answer.body["error"].get<std::string>().find("at most 2"), std::string::npos);
}

TEST(ServeService, AFailedJobsAnswerSaysWhoseFault) {
  ServiceFixture f("serve_service_failure");
  auto ids = f.queue.submit({new_job("", "a = 1\n"), new_job("", "b = 1\n")});
  auto first = f.queue.take("");
  f.queue.finish(first->id, JobStatus::Failed, first->store_key, "the problem cannot load");
  auto second = f.queue.take("");
  f.queue.finish(second->id, JobStatus::Failed, second->store_key, "disk full", false,
                 kbv::serve::JobFailure::Service);
  EXPECT_EQ(f.service.status(ids[0]).body["failure"], "request");
  EXPECT_EQ(f.service.status(ids[1]).body["failure"], "service");
  EXPECT_EQ(f.service.status(ids[1]).body["error"], "disk full");
}

TEST(ServeService, HealthSaysDegradedThenUnavailable) {
  ServiceFixture f("serve_service_health");
  auto health = f.service.health();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "ok");
  f.pool.live_ = 1;  // one device's thread left after a failed health check
  health = f.service.health();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "degraded");
  f.pool.live_ = 0;
  health = f.service.health();
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body["status"], "unavailable");
  EXPECT_GT(health.retry_after_s, 0);
  f.pool.live_ = 2;
  f.service.drain();
  health = f.service.health();
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body["status"], "draining");
}

// --- reward components -------------------------------------------------------------------------

TEST(ServeReward, CompactsAResult) {
  json result = {{"verdict", "correct"},
                 {"speedup",
                  {{"headline", "vs_tf32"},
                   {"vs_tf32", {{"value", 1.5}, {"ci_low", 1.4}, {"ci_high", 1.6}, {"tie", false}}},
                   {"vs_fp32", nullptr}}},
                 {"memory", {{"peak_ratio", 0.9}}},
                 {"flags", json::array({{{"id", "a"}, {"severity", "warn"}},
                                        {{"id", "b"}, {"severity", "info"}}})}};
  auto r = kbv::serve::reward_of(result);
  EXPECT_TRUE(r["correct"]);
  EXPECT_FALSE(r["hacked"]);
  EXPECT_EQ(r["speedup"]["value"], 1.5);
  EXPECT_EQ(r["speedup"]["ci_low"], 1.4);
  EXPECT_TRUE(r["speedup_fp32"].is_null());
  EXPECT_EQ(r["memory_ratio"], 0.9);
  EXPECT_EQ(r["flags"]["warn"], json::array({"a"}));
  auto hacked = kbv::serve::reward_of(
      {{"verdict", "rejected"}, {"flags", json::array({{{"id", "h"}, {"severity", "reject"}}})}});
  EXPECT_TRUE(hacked["hacked"]);
  EXPECT_FALSE(hacked["correct"]);
  EXPECT_TRUE(hacked["speedup"].is_null());
  EXPECT_EQ(hacked["flags"]["reject"], json::array({"h"}));
}

}  // namespace
