// Scheduling choices of `kbv run`: which candidates are built ahead, how many evaluations share a
// device by default, and the build workers' lower CPU priority.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "orchestrate/build_cache.hpp"
#include "orchestrate/worker_process.hpp"
#include "schedule/devices.hpp"
#include "schedule/suite.hpp"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  auto dir =
      fs::temp_directory_path() /
      (name + "-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  fs::create_directories(dir);
  return dir;
}

fs::path write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// Starts a WorkerProcess whose "python" is a shell script that writes its own niceness to a
// file, and returns what it wrote.
std::string niceness_of_worker(int nice) {
  auto dir = temp_dir("kbv-nice");
  auto script = write(dir / "fake_python.sh",
                      "#!/bin/sh\nnice > \"$KBV_TEST_NICE_OUT.tmp\"\n"
                      "mv \"$KBV_TEST_NICE_OUT.tmp\" \"$KBV_TEST_NICE_OUT\"\n");
  fs::permissions(script, fs::perms::owner_all);
  auto out = dir / "nice.txt";
  kbv::orchestrate::WorkerOptions options;
  options.role = kbv::orchestrate::WorkerRole::Candidate;
  options.python = script.string();
  options.working_directory = dir;
  options.log_file = dir / "worker.log";
  options.environment = {{"KBV_TEST_NICE_OUT", out.string()}};
  options.sandbox.enabled = false;
  options.nice = nice;
  std::string value;
  {
    kbv::orchestrate::WorkerProcess worker(options);
    for (int i = 0; i < 200 && !fs::exists(out); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream(out) >> value;
  }  // the destructor reaps the worker
  fs::remove_all(dir);
  return value;
}

}  // namespace

TEST(BuildsOnImport, ExtensionSourcesAreBuiltAhead) {
  auto dir = temp_dir("kbv-builds");
  EXPECT_TRUE(kbv::orchestrate::builds_on_import(
      write(dir / "inline.py",
            "from torch.utils.cpp_extension import load_inline\n_ext = load_inline(name='x')\n")));
  EXPECT_TRUE(kbv::orchestrate::builds_on_import(write(
      dir / "module.py", "import torch.utils.cpp_extension as ce\next = ce.load('x', [])\n")));
  fs::remove_all(dir);
}

TEST(BuildsOnImport, PurePyTorchIsLeftToItsEvaluation) {
  auto dir = temp_dir("kbv-builds");
  EXPECT_FALSE(kbv::orchestrate::builds_on_import(
      write(dir / "pure.py",
            "import torch\nclass ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n        return torch.relu(x)\n")));
  fs::remove_all(dir);
}

TEST(BuildsOnImport, UnreadableFileIsBuiltAheadSoTheWorkerReportsIt) {
  EXPECT_TRUE(kbv::orchestrate::builds_on_import("/nonexistent/kbv/candidate.py"));
}

TEST(DefaultWorkersPerDevice, CpuEvaluatesOneAtATime) {
  EXPECT_EQ(kbv::schedule::default_workers_per_device("cpu", 0, 64), 1);
}

TEST(DefaultWorkersPerDevice, HalfTheCoresOverTheGpusBetweenTwoAndFour) {
  using kbv::schedule::default_workers_per_device;
  EXPECT_EQ(default_workers_per_device("cuda:0", 1, 16), 4);  // the H200 host, capped
  EXPECT_EQ(default_workers_per_device("cuda:0", 2, 12), 3);
  EXPECT_EQ(default_workers_per_device("cuda:3", 8, 128), 4);  // capped
  EXPECT_EQ(default_workers_per_device("cuda:0", 1, 2), 2);    // floor
  EXPECT_EQ(default_workers_per_device("cuda:0", 0, 0), 2);    // nothing known
}

// The test process may itself run niced (a CI runner); the worker's niceness is relative to it.
int own_niceness() { return ::getpriority(PRIO_PROCESS, 0); }

TEST(WorkerPriority, DefaultKeepsTheOrchestratorsNiceness) {
  EXPECT_EQ(niceness_of_worker(0), std::to_string(own_niceness()));
}

TEST(WorkerPriority, BuildWorkersRunNicer) {
  EXPECT_EQ(niceness_of_worker(10), std::to_string(std::min(19, own_niceness() + 10)));
}

namespace kbv::schedule {
namespace {

Task task_of(const std::string& path, std::optional<int> level, const std::string& candidate) {
  Task t;
  t.problem.path = path;
  t.problem.level = level;
  t.candidate.path = candidate;
  return t;
}

TEST(InterleaveByLevel, TakesTheLevelsInTurnAndKeepsAProblemsCandidatesTogether) {
  std::vector<Task> tasks = {
      task_of("p/level1/19_ReLU.py", 1, "a"),      task_of("p/level1/19_ReLU.py", 1, "b"),
      task_of("p/level1/20_LeakyReLU.py", 1, "a"), task_of("p/level1/21_Sigmoid.py", 1, "a"),
      task_of("p/level2/1_Conv.py", 2, "a"),       task_of("p/level3/1_MLP.py", 3, "a"),
      task_of("p/level3/2_Wide.py", 3, "a")};
  std::vector<const Task*> ordered;
  for (const auto& t : tasks) ordered.push_back(&t);
  interleave_by_level(ordered);
  std::vector<std::string> got;
  for (const auto* t : ordered)
    got.push_back(t->problem.path.filename().string() + ":" + t->candidate.path.string());
  EXPECT_EQ(got,
            (std::vector<std::string>{"19_ReLU.py:a", "19_ReLU.py:b", "1_Conv.py:a", "1_MLP.py:a",
                                      "20_LeakyReLU.py:a", "2_Wide.py:a", "21_Sigmoid.py:a"}));
}

}  // namespace
}  // namespace kbv::schedule
