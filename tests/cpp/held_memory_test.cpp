// Memory held by the candidate when kbv's own memory ran out: the rule (judge/held_memory.hpp)
// and its facts (eval/held_memory.hpp), read from a constructed /proc and from constructed
// device readings.
#include "eval/held_memory.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "judge/held_memory.hpp"

namespace kbv {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr double GB = 1e9;
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

judge::HeldMemory held(bool device, double held_bytes, double planned_bytes) {
  return {device, held_bytes, planned_bytes, "test"};
}

TEST(HeldMemoryRule, AnHonestCandidatesContextAndCachesAreNeverBlamed) {
  // A small problem plans little; the floor covers what every honest process holds anyway.
  EXPECT_FALSE(judge::held_beyond_plan(held(true, 1.5 * GB, 0.1 * GB)));
  EXPECT_FALSE(judge::held_beyond_plan(held(true, 4 * GiB, 0.1 * GB)));
  EXPECT_FALSE(judge::held_beyond_plan(held(false, 0.6 * GB, 0.1 * GB)));
  EXPECT_DOUBLE_EQ(judge::held_allowance(held(true, 0, 0.1 * GB)), judge::kDeviceHeldFloor);
  EXPECT_DOUBLE_EQ(judge::held_allowance(held(false, 0, 0.1 * GB)), judge::kHostHeldFloor);
}

TEST(HeldMemoryRule, MoreThanTheWholeEvaluationsPlanIsTheCandidates) {
  EXPECT_TRUE(judge::held_beyond_plan(held(true, 120 * GB, 0.1 * GB)));
  EXPECT_TRUE(judge::held_beyond_plan(held(false, 3 * GiB, 0.1 * GB)));
  // A large problem's plan is the allowance: its honest candidate may hold its working set.
  EXPECT_FALSE(judge::held_beyond_plan(held(true, 60 * GB, 70 * GB)));
  EXPECT_TRUE(judge::held_beyond_plan(held(true, 71 * GB, 70 * GB)));
  const auto reason = judge::held_memory_reason(held(true, 120 * GB, 10 * GB));
  EXPECT_NE(reason.find("device memory"), std::string::npos) << reason;
  EXPECT_NE(reason.find("120.00 GB"), std::string::npos) << reason;
  EXPECT_NE(reason.find("10.00 GB"), std::string::npos) << reason;
  const auto note = judge::held_memory_note(held(false, 1 * GB, 0));
  EXPECT_NE(note.find("host memory"), std::string::npos) << note;
}

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kbv-held-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void process(int pid, int parent, long anon_kb, long shmem_kb) {
    fs::create_directories(root_ / std::to_string(pid));
    std::ofstream(root_ / std::to_string(pid) / "status")
        << "Name:\tpython3\nState:\tS (sleeping)\nPid:\t" << pid << "\nPPid:\t" << parent
        << "\nVmRSS:\t  999999 kB\nRssAnon:\t  " << anon_kb << " kB\nRssFile:\t  5000 kB\n"
        << "RssShmem:\t  " << shmem_kb << " kB\nThreads:\t4\n";
  }
  fs::path root_;
};

TEST_F(FakeProc, ATreesResidentMemoryCountsItsDescendantsAndNothingElse) {
  process(1, 0, 100, 0);
  process(40, 1, 1000, 0);                 // the orchestrator
  process(41, 40, 2000, 0);                // the reference: not the candidate's
  process(42, 40, 1000000, 3000);          // the candidate's worker
  process(50, 42, 500000, 0);              // a process it started
  process(51, 50, 250000, 1000);           // and one that process started
  process(60, 1, 9000000, 0);              // unrelated
  fs::create_directories(root_ / "self");  // not a process number
  fs::create_directories(root_ / "77");    // ended while the folder was read: no status
  auto bytes = eval::resident_bytes_of_tree(42, root_);
  ASSERT_TRUE(bytes);
  EXPECT_DOUBLE_EQ(*bytes, (1000000 + 3000 + 500000 + 250000 + 1000) * 1024.0);
  auto alone = eval::resident_bytes_of_tree(51, root_);
  ASSERT_TRUE(alone);
  EXPECT_DOUBLE_EQ(*alone, 251000 * 1024.0);
  EXPECT_FALSE(eval::resident_bytes_of_tree(99, root_));  // gone
}

TEST(HeldMemoryRealProc, ThisProcessIsResidentAndCounted) {
  std::vector<char> touched(64 << 20, 1);  // 64 MiB of heap, every page written
  auto bytes = eval::resident_bytes_of_tree(::getpid());
  ASSERT_TRUE(bytes);
  EXPECT_GE(*bytes, 64.0 * (1 << 20));
  EXPECT_EQ(touched[12345], 1);
}

// Readings of free memory that follow a script: one value per call, the last repeated.
struct Script {
  std::vector<std::optional<double>> values;
  size_t calls = 0;
  std::optional<double> operator()() {
    auto value = values[std::min(calls, values.size() - 1)];
    ++calls;
    return value;
  }
};

TEST(MemoryReturned, WhatCameBackOnceItSettled) {
  Script script{{10 * GB, 20 * GB, 40 * GB, 50 * GB, 50 * GB}};
  int ended = 0;
  auto returned =
      eval::memory_returned_by(std::ref(script), [&] { ++ended; }, {5ms, 0ms, 2000ms, 1e6});
  ASSERT_TRUE(returned);
  EXPECT_DOUBLE_EQ(*returned, 40 * GB);
  EXPECT_EQ(ended, 1);
}

TEST(MemoryReturned, ReadsOnForTheMinimumWhenTheDriverIsSlowToFree) {
  // The first readings after the end agree (nothing freed yet); the memory comes back later.
  Script script{{10 * GB, 10 * GB, 10 * GB, 10 * GB, 10 * GB, 10 * GB, 70 * GB, 70 * GB}};
  auto returned = eval::memory_returned_by(std::ref(script), [] {}, {10ms, 200ms, 5000ms, 1e6});
  ASSERT_TRUE(returned);
  EXPECT_DOUBLE_EQ(*returned, 60 * GB);
}

TEST(MemoryReturned, StopsAtTheLimitAndNeverReportsLess) {
  Script rising{{0.0, 1 * GB, 2 * GB, 3 * GB, 4 * GB, 5 * GB, 6 * GB, 7 * GB, 8 * GB, 9 * GB}};
  for (int i = 10; i < 2000; ++i) rising.values.push_back(i * GB);
  auto returned = eval::memory_returned_by(std::ref(rising), [] {}, {5ms, 0ms, 60ms, 1e6});
  ASSERT_TRUE(returned);
  EXPECT_LT(rising.calls, 40u);
  Script fell{{10 * GB, 8 * GB}};  // something else allocated meanwhile
  auto none = eval::memory_returned_by(std::ref(fell), [] {}, {5ms, 0ms, 100ms, 1e6});
  ASSERT_TRUE(none);
  EXPECT_DOUBLE_EQ(*none, 0);
}

TEST(MemoryReturned, AReadingThatFailedTellsNothing) {
  int ended = 0;
  Script before{{std::nullopt}};
  EXPECT_FALSE(eval::memory_returned_by(std::ref(before), [&] { ++ended; }));
  EXPECT_EQ(ended, 0);  // nothing to compare with: the worker is left to the evaluation
  Script after{{10 * GB, std::nullopt}};
  EXPECT_FALSE(eval::memory_returned_by(std::ref(after), [&] { ++ended; }, {5ms, 0ms, 100ms}));
  EXPECT_EQ(ended, 1);
}

}  // namespace
}  // namespace kbv
