#include "eval/device_gate.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

using kbv::eval::DeviceGate;
using namespace std::chrono_literals;

namespace {
// Waits (up to 5 s) until `done` holds; false if it never does.
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}
}  // namespace

TEST(DeviceGate, SharedHoldersCoexist) {
  DeviceGate gate;
  auto a = gate.shared();
  auto b = gate.shared();
  EXPECT_EQ(gate.shared_holders(), 2);
  a.release();
  EXPECT_EQ(gate.shared_holders(), 1);
}

TEST(DeviceGate, ExclusiveWaitsForSharedHoldersToLeave) {
  DeviceGate gate;
  auto reader = gate.shared();
  std::atomic<bool> writing{false};
  std::thread writer([&] {
    auto hold = gate.exclusive();
    writing = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(writing.load()) << "the timing run started while an exchange was in flight";
  reader.release();
  EXPECT_TRUE(eventually([&] { return writing.load(); }));
  writer.join();
}

TEST(DeviceGate, WaitingTimingRunKeepsNewExchangesOut) {
  DeviceGate gate;
  auto first_reader = gate.shared();
  std::atomic<bool> writer_in{false}, writer_out{false}, second_in{false};
  std::atomic<bool> second_saw_writer_done{false};
  std::thread writer([&] {
    auto hold = gate.exclusive();
    writer_in = true;
    std::this_thread::sleep_for(30ms);
    writer_out = true;
  });
  // Give the writer time to start waiting, then a new exchange arrives.
  std::this_thread::sleep_for(30ms);
  std::thread second([&] {
    auto hold = gate.shared();
    second_saw_writer_done = writer_out.load();
    second_in = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(second_in.load()) << "a new exchange overtook the waiting timing run";
  first_reader.release();
  EXPECT_TRUE(eventually([&] { return second_in.load(); }));
  writer.join();
  second.join();
  EXPECT_TRUE(writer_in.load());
  EXPECT_TRUE(second_saw_writer_done.load()) << "the exchange ran during the timing run";
}

TEST(DeviceGate, TimingRunsOwnCallsPassThrough) {
  DeviceGate gate;
  auto exclusive = gate.exclusive();
  EXPECT_TRUE(gate.held_exclusively());
  auto inner = gate.shared();  // would deadlock if it waited
  EXPECT_EQ(gate.shared_holders(), 0);
  exclusive.release();
  EXPECT_FALSE(gate.held_exclusively());
  auto after = gate.shared();
  EXPECT_EQ(gate.shared_holders(), 1);
}

TEST(DeviceGate, OnlyTheHoldingThreadHoldsItItself) {
  // An evaluation never waits for memory while it holds the device exclusively
  // (WorkerExchange::reference): others wait for the gate holding what it would wait for.
  DeviceGate gate;
  EXPECT_FALSE(gate.held_by_this_thread());
  auto exclusive = gate.exclusive();
  EXPECT_TRUE(gate.held_by_this_thread());
  bool elsewhere = true;
  std::thread([&] { elsewhere = gate.held_by_this_thread(); }).join();
  EXPECT_FALSE(elsewhere);
  exclusive.release();
  EXPECT_FALSE(gate.held_by_this_thread());
}

TEST(DeviceGate, OneTimingRunAtATime) {
  DeviceGate gate;
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> writers;
  for (int k = 0; k < 4; ++k) {
    writers.emplace_back([&] {
      for (int j = 0; j < 20; ++j) {
        auto hold = gate.exclusive();
        int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(1ms);
        --inside;
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(most.load(), 1);
}
