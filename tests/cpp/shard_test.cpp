// The split of `kbv run --shard I/N`: by problem, deterministic, every task in exactly one shard.
#include "schedule/shard.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "eval/eval_request.hpp"

namespace {

using kbv::schedule::parse_shard;
using kbv::schedule::Task;
using kbv::schedule::tasks_of_shard;

// `candidates` candidates for each problem, under the problem root `root`.
std::vector<Task> suite(const std::string& root, const std::vector<std::string>& problems,
                        int candidates) {
  std::vector<Task> tasks;
  for (const auto& p : problems) {
    for (int c = 0; c < candidates; ++c) {
      Task t;
      t.problem.path = std::filesystem::path(root) / p;
      t.candidate.path = "cands/run/" + p + "." + std::to_string(c);
      t.candidate.sample = c;
      tasks.push_back(t);
    }
  }
  return tasks;
}

const std::vector<std::string> kProblems = {"level1/1_A.py", "level1/2_B.py", "level1/3_C.py",
                                            "level2/1_D.py", "level2/2_E.py", "level3/1_F.py",
                                            "level3/2_G.py"};

TEST(Shard, ParsesIOfN) {
  auto s = parse_shard("2/4");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 4);
  EXPECT_TRUE(parse_shard("0/1").whole());
}

TEST(Shard, RejectsWhatIsNotIOfN) {
  for (const char* bad :
       {"4/4", "-1/4", "1/0", "0/0", "1", "a/b", "1/2/3", "", "/2", "1/", " 1/2", "1/2x"}) {
    EXPECT_THROW(parse_shard(bad), kbv::eval::UsageError) << bad;
  }
}

TEST(Shard, EveryTaskInExactlyOneShardAndEachProblemInOne) {
  const auto tasks = suite("problems", kProblems, 3);
  for (int n : {1, 2, 3, 4, 7, 10}) {
    std::map<std::string, int> times_seen;
    std::map<std::filesystem::path, std::set<int>> shards_of_problem;
    for (int i = 0; i < n; ++i) {
      for (const auto& t : tasks_of_shard(tasks, {i, n}, "problems")) {
        ++times_seen[t.candidate.path.string()];
        shards_of_problem[t.problem.path].insert(i);
      }
    }
    EXPECT_EQ(times_seen.size(), tasks.size()) << n;
    for (const auto& [candidate, times] : times_seen) EXPECT_EQ(times, 1) << candidate;
    for (const auto& [problem, shards] : shards_of_problem) EXPECT_EQ(shards.size(), 1u);
  }
}

TEST(Shard, BalancedWithinOneProblem) {
  const auto tasks = suite("problems", kProblems, 2);
  for (int i = 0; i < 3; ++i) {
    const auto size = tasks_of_shard(tasks, {i, 3}, "problems").size();
    EXPECT_TRUE(size == 4 || size == 6) << i << ": " << size;  // 3, 2, 2 problems of 2
  }
}

TEST(Shard, SameSplitWhereverTheTreesAreAndInWhateverOrderFound) {
  const auto here = suite("problems", kProblems, 2);
  auto there = suite("/scratch/me/kbv/problems/", kProblems, 2);
  std::reverse(there.begin(), there.end());
  for (int i = 0; i < 4; ++i) {
    std::set<std::string> a, b;
    for (const auto& t : tasks_of_shard(here, {i, 4}, "problems")) {
      a.insert(t.candidate.path.string());
    }
    for (const auto& t : tasks_of_shard(there, {i, 4}, "/scratch/me/kbv/problems/")) {
      b.insert(t.candidate.path.string());
    }
    EXPECT_EQ(a, b) << i;
  }
}

TEST(Shard, ProblemsDealtInSortedOrder) {
  // The documented rule: the k-th problem (sorted by relative path) goes to shard k mod N.
  const auto tasks = suite("p", kProblems, 1);
  const auto first = tasks_of_shard(tasks, {0, 3}, "p");
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].problem.path, std::filesystem::path("p/level1/1_A.py"));
  EXPECT_EQ(first[1].problem.path, std::filesystem::path("p/level2/1_D.py"));
  EXPECT_EQ(first[2].problem.path, std::filesystem::path("p/level3/2_G.py"));
}

TEST(Shard, MoreShardsThanProblemsLeavesEmptyShards) {
  const auto tasks = suite("problems", {"level1/1_A.py", "level1/2_B.py"}, 2);
  EXPECT_EQ(tasks_of_shard(tasks, {0, 5}, "problems").size(), 2u);
  EXPECT_EQ(tasks_of_shard(tasks, {1, 5}, "problems").size(), 2u);
  for (int i = 2; i < 5; ++i) EXPECT_TRUE(tasks_of_shard(tasks, {i, 5}, "problems").empty());
  EXPECT_TRUE(tasks_of_shard({}, {0, 2}, "problems").empty());
}

TEST(Shard, WholeSuiteKeepsEverythingInOrder) {
  const auto tasks = suite("problems", kProblems, 2);
  const auto all = tasks_of_shard(tasks, {0, 1}, "problems");
  ASSERT_EQ(all.size(), tasks.size());
  for (size_t k = 0; k < all.size(); ++k) EXPECT_EQ(all[k].candidate.path, tasks[k].candidate.path);
}

}  // namespace
