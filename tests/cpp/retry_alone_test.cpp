// The retry alone of a failure on a shared device (schedule/retry_alone.hpp), shared by kbv run
// and kbv serve: which outcomes are retried, what the second attempt's result says, and the
// mechanism: a retry waits until no evaluation is in progress on its device, nothing starts on
// the device beside it, and other devices are not held.
#include "schedule/retry_alone.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "eval/device_gate.hpp"

namespace {

using kbv::FaultKind;
using kbv::HarnessFault;
using kbv::Result;
using kbv::Verdict;
using kbv::schedule::AloneRetries;
using namespace std::chrono_literals;

Result with(Verdict verdict, std::string reason = "it failed\nat line 2") {
  Result r;
  r.verdict = verdict;
  r.reason = std::move(reason);
  return r;
}

TEST(RetryAlone, ARuntimeErrorOrTimeoutOnASharedDeviceIsRetried) {
  for (auto v : {Verdict::RuntimeError, Verdict::Timeout}) {
    EXPECT_TRUE(kbv::schedule::needs_retry_alone(with(v), 2));
    EXPECT_TRUE(kbv::schedule::needs_retry_alone(with(v), 4));
    EXPECT_FALSE(kbv::schedule::needs_retry_alone(with(v), 1));  // alone already: it stands
  }
  for (auto v : {Verdict::Correct, Verdict::Incorrect, Verdict::Rejected, Verdict::CompileError}) {
    EXPECT_FALSE(kbv::schedule::needs_retry_alone(with(v), 2));  // not the neighbours' doing
  }
  // The reference out of device memory beside others: theirs; any other fault of kbv is not.
  Result oom = with(Verdict::HarnessError);
  oom.harness_fault = HarnessFault{FaultKind::OutOfMemory, "drawing the cases", "CUDA OOM"};
  EXPECT_TRUE(kbv::schedule::needs_retry_alone(oom, 2));
  EXPECT_FALSE(kbv::schedule::needs_retry_alone(oom, 1));
  Result disk = with(Verdict::HarnessError);
  disk.harness_fault = HarnessFault{FaultKind::DiskFull, "writing", "ENOSPC"};
  EXPECT_FALSE(kbv::schedule::needs_retry_alone(disk, 2));
}

TEST(RetryAlone, AGpusOnlyEvaluationsReferenceOutOfMemoryIsRetriedAlone) {
  // kbv run draws the next problem's cases ahead on a GPU beside its only evaluation: a
  // reference out of device memory there may be that draw's doing. The candidate's own failures
  // stand: it was the device's only candidate.
  using kbv::schedule::draws_ahead_beside;
  using kbv::schedule::needs_retry_alone;
  EXPECT_TRUE(draws_ahead_beside("cuda:0"));
  EXPECT_FALSE(draws_ahead_beside("cpu"));
  Result oom = with(Verdict::HarnessError);
  oom.harness_fault = HarnessFault{FaultKind::OutOfMemory, "drawing the cases", "CUDA OOM"};
  EXPECT_TRUE(needs_retry_alone(oom, 1, draws_ahead_beside("cuda:0")));
  EXPECT_FALSE(needs_retry_alone(oom, 1, draws_ahead_beside("cpu")));
  EXPECT_FALSE(needs_retry_alone(with(Verdict::RuntimeError), 1, draws_ahead_beside("cuda:0")));
  EXPECT_FALSE(needs_retry_alone(with(Verdict::Timeout), 1, true));
}

TEST(RetryAlone, ACorrectCandidateWhosePlansWereSqueezedIsTimedAgainAlone) {
  using kbv::schedule::needs_retry_alone;
  Result squeezed = with(Verdict::Correct, "correct");
  squeezed.add_flag("plans_under_pressure", kbv::Severity::Info, "3.00 GiB ran out");
  EXPECT_TRUE(needs_retry_alone(squeezed, 2));
  EXPECT_TRUE(needs_retry_alone(squeezed, 1, /*draws_ahead_beside=*/true));
  EXPECT_FALSE(needs_retry_alone(squeezed, 1, false));  // alone already: its figures stand
  EXPECT_FALSE(needs_retry_alone(with(Verdict::Correct, "correct"), 2));  // room: it stands
  Result wrong = with(Verdict::Incorrect);
  wrong.add_flag("plans_under_pressure", kbv::Severity::Info, "3.00 GiB ran out");
  EXPECT_FALSE(needs_retry_alone(wrong, 2));  // not timed: no figure to repair
}

TEST(RetryAlone, TheSecondAttemptNamesTheFirst) {
  const auto first = kbv::schedule::first_attempt(with(Verdict::Timeout));
  EXPECT_EQ(first, "timeout: it failed");
  Result second = with(Verdict::Correct, "");
  kbv::schedule::mark_evaluated_alone(second, first);
  ASSERT_TRUE(second.has_flag("evaluated_alone"));
  EXPECT_NE(second.flags.front().detail.find("first attempt ended timeout: it failed"),
            std::string::npos);
  kbv::eval::DeviceGate gate;
  kbv::eval::EvalRequest request;
  request.placement.gate = &gate;
  request.placement.evaluations_per_device = 3;
  request.placement.sessions_ahead = true;
  request.placement.spare_reference = true;
  kbv::schedule::place_alone(request);
  EXPECT_EQ(request.placement.gate, nullptr);
  EXPECT_EQ(request.placement.evaluations_per_device, 1);
  EXPECT_FALSE(request.placement.sessions_ahead);
  EXPECT_FALSE(request.placement.spare_reference);  // nothing starts beside the retry
}

TEST(RetryAlone, ARetryWaitsForTheDeviceAndNothingStartsBesideIt) {
  AloneRetries<int> alone;
  ASSERT_TRUE(alone.try_enter("cuda:0"));  // evaluation A
  ASSERT_TRUE(alone.try_enter("cuda:0"));  // evaluation B, beside it
  alone.defer("cuda:0", 7);                // A failed while B ran
  alone.leave("cuda:0");
  EXPECT_TRUE(alone.waiting("cuda:0"));
  EXPECT_FALSE(alone.try_enter("cuda:0"));  // nothing new starts before the retry
  EXPECT_TRUE(alone.try_enter("cuda:1"));   // another device is not held
  alone.leave("cuda:1");

  std::atomic<bool> b_running{true}, ran_beside_b{false}, entered_during_retry{false};
  std::atomic<int> runs{0}, let_go{0};
  std::vector<int> retried;
  std::thread a([&] {
    alone.run_waiting(
        "cuda:0", [&] { ++let_go; },
        [&](int retry) {
          if (b_running) ran_beside_b = true;
          if (alone.try_enter("cuda:0")) entered_during_retry = true;
          retried.push_back(retry);
          ++runs;
        });
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(runs, 0);  // B is still in progress
  b_running = false;
  alone.leave("cuda:0");  // B ends
  a.join();
  EXPECT_EQ(retried, std::vector<int>{7});
  EXPECT_FALSE(ran_beside_b);
  EXPECT_FALSE(entered_during_retry);
  EXPECT_EQ(let_go, 2);  // before waiting, and after the retries
  EXPECT_FALSE(alone.waiting("cuda:0"));
  EXPECT_TRUE(alone.try_enter("cuda:0"));  // the device is open again
  alone.leave("cuda:0");
}

TEST(RetryAlone, EveryThreadOfTheDeviceWaitsAndOneRunsTheRetries) {
  AloneRetries<int> alone;
  alone.defer("cpu", 1);
  alone.defer("cpu", 2);
  alone.defer("other", 3);
  std::atomic<int> runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      alone.run_waiting(
          "cpu", [] {}, [&](int) { ++runs; });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(runs, 2);  // each of cpu's retries once, whichever thread ran them
  EXPECT_FALSE(alone.waiting("cpu"));
  EXPECT_TRUE(alone.waiting("other"));  // left for a thread of its device
  int never = 0;
  alone.run_waiting(
      "cpu", [&] { ++never; }, [&](int) { ++never; });
  EXPECT_EQ(never, 0);  // nothing waits: returns at once
}

}  // namespace
