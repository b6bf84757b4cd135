// The plan `kbv run --ray` hands its Python driver: one shard per problem with work left, each
// candidate with its key and its path relative to the candidate root (recreated on the node).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedule/ray_run.hpp"

namespace {

using kbv::schedule::ray_plan;
using kbv::schedule::RayRunRequest;
using kbv::schedule::SuiteRequest;
using kbv::schedule::Task;
using kbv::schedule::WorkList;

Task task(const std::string& problem, const std::string& candidate) {
  Task t;
  t.problem.path = "/suite/problems/" + problem;
  t.candidate.path = "/suite/cands/" + candidate;
  return t;
}

TEST(RayPlan, OneShardPerProblemWithItsFilesAndKeys) {
  const std::vector<Task> tasks = {task("level1/3_ReLU.py", "plain/level1/3_ReLU.py"),
                                   task("level1/3_ReLU.py", "modelB/level_1_problem_3_sample_0.py"),
                                   task("level1/4_Softmax.py", "plain/level1/4_Softmax.py")};
  WorkList work;
  for (size_t i = 0; i < tasks.size(); ++i) {
    work.tasks.push_back(&tasks[i]);
    work.keys.push_back("k" + std::to_string(i));
  }
  SuiteRequest suite;
  suite.problems = "/suite/problems";
  suite.candidates = "/suite/cands/";
  suite.settings.settings.device = "cuda:1";
  const auto plan = ray_plan(work, suite, RayRunRequest{"10.0.0.1:6379", {"--draws", "2"}, 3});
  EXPECT_EQ(plan["address"], "10.0.0.1:6379");
  EXPECT_EQ(plan["device"], "cuda");  // a node's task has one GPU, whichever it is
  EXPECT_EQ(plan["node_arguments"], nlohmann::json({"--draws", "2"}));
  ASSERT_EQ(plan["shards"].size(), 2u);
  const auto& relu = plan["shards"][0];
  EXPECT_EQ(relu["problem"]["relative"], "level1/3_ReLU.py");
  EXPECT_EQ(relu["problem"]["path"], "/suite/problems/level1/3_ReLU.py");
  ASSERT_EQ(relu["tasks"].size(), 2u);
  EXPECT_EQ(relu["tasks"][0]["key"], "k0");
  EXPECT_EQ(relu["tasks"][0]["relative"], "plain/level1/3_ReLU.py");
  EXPECT_EQ(relu["tasks"][1]["relative"], "modelB/level_1_problem_3_sample_0.py");
  EXPECT_EQ(plan["shards"][1]["tasks"][0]["key"], "k2");
}

TEST(RayPlan, NothingLeftIsNoShard) {
  const auto plan = ray_plan(WorkList{}, SuiteRequest{}, RayRunRequest{"auto", {}, 3});
  EXPECT_TRUE(plan["shards"].empty());
  EXPECT_EQ(plan["device"], "cpu");
}

}  // namespace
