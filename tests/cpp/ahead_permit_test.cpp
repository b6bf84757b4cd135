// What a reference session started ahead of its evaluation may do beside the evaluations running
// on its device (eval/reference_work.hpp, permit_ahead): each within the device's ahead share,
// reserved at once or not at all. Sizes are KernelBench's on the H200.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "eval/eval_request.hpp"
#include "eval/memory_ledger.hpp"
#include "eval/memory_plan.hpp"
#include "eval/reference_session.hpp"
#include "eval/reference_work.hpp"

namespace kbv::eval {
namespace {

constexpr double GB = 1e9;
constexpr double kH200 = 150 * GB;  // torch's total_memory on the H200

nlohmann::json loaded(double input_bytes, double state_bytes, const char* kind = "device",
                      const char* placed = "device") {
  return {{"memory", {{"kind", kind}, {"total_bytes", kH200}}},
          {"sizes", {{"input_bytes", input_bytes}, {"state_bytes", state_bytes}}},
          {"placed", placed}};
}

TEST(AheadPermit, ASmallProblemIsDrawnAheadWithinWhatItReserved) {
  MemoryLedger ahead;
  // A level-2 convolution chain: 0.4 GB of inputs, 2 MB of weights.
  auto permit = permit_ahead(&ahead, loaded(0.4 * GB, 0.002 * GB));
  EXPECT_EQ(permit.scope, AheadPermit::Scope::draw);
  ASSERT_TRUE(permit.reservation.has_value());
  EXPECT_TRUE(permit.reservation->held());
  EXPECT_DOUBLE_EQ(permit.bytes, working_bytes_before_drawing({0.4 * GB, 0.002 * GB}));
  EXPECT_DOUBLE_EQ(ahead.capacity(), kH200 * kAheadShare);
  EXPECT_DOUBLE_EQ(ahead.reserved_bytes(), permit.bytes);
  EXPECT_NE(permit.note.find("drawn ahead"), std::string::npos) << permit.note;
  permit.reservation.reset();  // the evaluation took the session over
  EXPECT_DOUBLE_EQ(ahead.reserved_bytes(), 0);
}

TEST(AheadPermit, ALargeElementwiseProblemIsLoadedAheadAndDrawnByItsEvaluation) {
  MemoryLedger ahead;
  // 19_ReLU: 6.4 GB of inputs, no parameters: its draw may need 51 GB, far beyond the share.
  auto permit = permit_ahead(&ahead, loaded(6.4 * GB, 0));
  EXPECT_EQ(permit.scope, AheadPermit::Scope::load);
  EXPECT_DOUBLE_EQ(permit.bytes, 0);
  EXPECT_NE(permit.note.find("drawn by its evaluation"), std::string::npos) << permit.note;
  EXPECT_NE(permit.note.find("51.2 GB"), std::string::npos) << permit.note;
}

TEST(AheadPermit, SessionsAheadShareTheShareAndNeverWait) {
  MemoryLedger ahead;
  // Four device threads each start the next problem ahead: 1.2 GB of inputs draws may need
  // 9.6 GB, so the first is drawn and the others, beside it, only loaded.
  auto first = permit_ahead(&ahead, loaded(1.2 * GB, 0.01 * GB));
  EXPECT_EQ(first.scope, AheadPermit::Scope::draw);
  for (int i = 0; i < 3; ++i) {
    auto next = permit_ahead(&ahead, loaded(1.2 * GB, 0.01 * GB));
    EXPECT_EQ(next.scope, AheadPermit::Scope::load) << i;
  }
  EXPECT_LE(ahead.reserved_bytes(), ahead.capacity());
  EXPECT_EQ(ahead.waiting(), 0);
}

TEST(AheadPermit, AModelTooLargeForTheShareIsStartedByItsEvaluation) {
  MemoryLedger ahead;
  // 2_ShallowWideMLP: 8.6 GB of weights, held twice once loaded (the model, its initial copy).
  auto permit = permit_ahead(&ahead, loaded(0.01 * GB, 8.6 * GB));
  EXPECT_EQ(permit.scope, AheadPermit::Scope::none);
  EXPECT_FALSE(permit.reservation.has_value());
  EXPECT_DOUBLE_EQ(ahead.reserved_bytes(), 0);
  EXPECT_NE(permit.note.find("started by its evaluation"), std::string::npos) << permit.note;
}

TEST(AheadPermit, AModelLoadedOnTheHostWaitsThereAtNoCostToTheDevice) {
  MemoryLedger ahead;
  // kbv run loads a session ahead with `place: host`: 2_ShallowWideMLP's 17 GB (its model and
  // initial copy) stay in host memory until its evaluation places them under its reservation.
  auto permit = permit_ahead(&ahead, loaded(0.01 * GB, 8.6 * GB, "device", "host"));
  EXPECT_EQ(permit.scope, AheadPermit::Scope::load);
  EXPECT_FALSE(permit.reservation.has_value());
  EXPECT_DOUBLE_EQ(permit.bytes, 0);
  EXPECT_DOUBLE_EQ(ahead.reserved_bytes(), 0);
  EXPECT_NE(permit.note.find("on the host"), std::string::npos) << permit.note;
  // One whose draw fits is still drawn ahead, within its reservation (the model placed first).
  auto small = permit_ahead(&ahead, loaded(0.4 * GB, 0.002 * GB, "device", "host"));
  EXPECT_EQ(small.scope, AheadPermit::Scope::draw);
  EXPECT_TRUE(small.reservation.has_value());
}

TEST(AheadPermit, OnTheHostOrWithoutAGateEverythingIsDrawnAhead) {
  MemoryLedger ahead;
  auto host = permit_ahead(&ahead, loaded(6.4 * GB, 8.6 * GB, "host"));
  EXPECT_EQ(host.scope, AheadPermit::Scope::draw);
  EXPECT_FALSE(host.reservation.has_value());
  EXPECT_TRUE(std::isinf(host.bytes));
  EXPECT_DOUBLE_EQ(ahead.capacity(), 0);  // not sized: nothing on the host is accounted here
  auto ungated = permit_ahead(nullptr, loaded(6.4 * GB, 0));
  EXPECT_EQ(ungated.scope, AheadPermit::Scope::draw);
}

TEST(AheadPermit, ALoadedProblemSaysWhetherItHasTheDeviceToItselfOnlyOnADevice) {
  // 45_Average_Pooling_2D's 17.2 GB of inputs (no forward figures): 137 GB before its first
  // draw, more than half an H200; on the host nothing is the device's.
  EXPECT_TRUE(loaded_needs_whole_device(loaded(17.2 * GB, 0)));
  EXPECT_FALSE(loaded_needs_whole_device(loaded(0.5 * GB, 0.1 * GB)));
  EXPECT_FALSE(loaded_needs_whole_device(loaded(17.2 * GB, 0, "host")));
  EXPECT_FALSE(loaded_needs_whole_device(nlohmann::json::object()));
  EXPECT_FALSE(loaded_needs_whole_device(nlohmann::json()));  // a session not loaded
}

// A device thread awaits a session's load to place its task (kbv run): the answer comes when the
// preparing thread has it, and a load that failed answers "no" (the evaluation reports why).
TEST(AheadPermit, AwaitingALoadReturnsItsAnswerOnceTheLoadHasOne) {
  for (const int answer : {1, 0, -2}) {
    ReferenceSession session;
    auto t = std::chrono::steady_clock::now();
    std::thread preparing([&session, answer] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      session.needs_whole_device = answer;
      session.needs_whole_device.notify_all();
    });
    // Awaited on a thread of its own: a wait that never ends fails here rather than hanging.
    auto awaited =
        std::async(std::launch::async, [&] { return await_needs_whole_device(session); });
    const bool ready = awaited.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    if (!ready) {  // set free, so that the test can end
      session.needs_whole_device = 0;
      session.needs_whole_device.notify_all();
    }
    preparing.join();
    ASSERT_TRUE(ready) << answer;
    EXPECT_EQ(awaited.get(), answer == 1) << answer;
    EXPECT_GE(std::chrono::steady_clock::now() - t, std::chrono::milliseconds(50)) << answer;
  }
}

// A session started ahead loads its problem outside the device's gate (the load is seconds of
// host work a timing run would otherwise wait for) and reads the device's facts, which make
// its context, through the gated call after it.
TEST(AheadPermit, ALoadKeptOffTheGateReadsTheDeviceUnderItAfterwards) {
  EvalRequest request;
  request.problem = "/suite/level1/19_ReLU.py";
  request.settings.device = "cuda";
  auto answer = [](nlohmann::json result) {
    orchestrate::Response r;
    r.status = orchestrate::Response::Status::Ok;
    r.result = std::move(result);
    return r;
  };
  const nlohmann::json facts = {
      {"environment", {{"torch", "2.11.0"}, {"device_name", "NVIDIA H100 80GB HBM3"}}},
      {"memory", {{"kind", "device"}, {"total_bytes", 85e9}}}};
  std::vector<std::string> gated, apart;
  ReferenceCall call = [&](const nlohmann::json& m) {
    gated.push_back(m["cmd"]);
    return answer(m["cmd"] == "device_facts"
                      ? facts
                      : nlohmann::json{{"sizes", {{"input_bytes", 6.4 * GB}}},
                                       {"environment", facts["environment"]},
                                       {"memory", facts["memory"]}});
  };
  ReferenceCall off_gate = [&](const nlohmann::json& m) {
    apart.push_back(m["cmd"]);
    EXPECT_EQ(m.value("device_facts", true), false);
    EXPECT_EQ(m.value("place", ""), "host");
    return answer({{"sizes", {{"input_bytes", 6.4 * GB}}}, {"placed", "host"}});
  };
  ReferenceSession session;
  load_problem_into(session, request, call, /*on_host=*/true, &off_gate);
  EXPECT_EQ(apart, std::vector<std::string>{"load_problem"});
  EXPECT_EQ(gated, std::vector<std::string>{"device_facts"});
  EXPECT_EQ(session.loaded["memory"]["total_bytes"], 85e9);
  EXPECT_EQ(session.loaded["sizes"]["input_bytes"], 6.4 * GB);
  EXPECT_EQ(session.key.software["device_name"], "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(loaded_needs_whole_device(session.loaded));  // 61 GB before its first draw

  // Placed on the device at once (an evaluation's own load): one call, under the gate.
  gated.clear();
  apart.clear();
  ReferenceSession own;
  load_problem_into(own, request, call, /*on_host=*/false, &off_gate);
  EXPECT_TRUE(apart.empty());
  EXPECT_EQ(gated, std::vector<std::string>{"load_problem"});
  EXPECT_EQ(own.loaded["memory"]["kind"], "device");
}

}  // namespace
}  // namespace kbv::eval
