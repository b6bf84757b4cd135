// An evaluation's waits for its device (the gate, the memory ledger) in the call trace: while it
// waits no call of its is in flight, and without these lines a gap in the trace could not tell
// a waiting evaluation from a missing one (session 24's H100 audit: 296 s of 1,001 in gaps).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "eval/candidate_worker.hpp"
#include "eval/device_gate.hpp"
#include "eval/exchange.hpp"
#include "eval/reference_session.hpp"

namespace kbv::eval {
namespace {

using namespace std::chrono_literals;

std::vector<nlohmann::json> read_lines(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

class ExchangeWaitTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("kbv_wait_trace_" + std::to_string(::getpid()) + ".jsonl");
    std::filesystem::remove(path_);
    ::setenv("KBV_TRACE_CALLS", path_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("KBV_TRACE_CALLS");
    std::filesystem::remove(path_);
  }
  std::filesystem::path path_;
  ReferenceSession session_;  // no worker: the lines carry pid 0
  CandidateWorker candidate_;
  EvalLimits limits_;
  DeviceGate gate_;
};

TEST_F(ExchangeWaitTrace, AWaitForTheGateIsALineAndAnEntryWithoutWaitIsNot) {
  WorkerExchange exchange(session_, candidate_, &gate_, limits_);
  exchange.set_stage("measurement");
  { auto free = exchange.exclusive(); }  // nobody else: no wait worth a line

  auto other = gate_.shared();  // another evaluation's call in flight
  std::thread releaser([&] {
    std::this_thread::sleep_for(150ms);
    other.release();
  });
  { auto timed = exchange.exclusive(); }
  releaser.join();
  auto lines = read_lines(path_);
  // Only waits of 10 ms or more are lines: the entry without a wait made none (a loaded machine
  // might stall it past 10 ms, never past the 100 ms the contended one waited).
  for (const auto& line : lines) EXPECT_GE(line["s"].get<double>(), 0.01) << line;
  std::erase_if(lines, [](const nlohmann::json& line) { return line["s"].get<double>() < 0.1; });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["role"], "harness");
  EXPECT_EQ(lines[0]["cmd"], "wait_gate");
  EXPECT_EQ(lines[0]["pid"], 0);
  EXPECT_GE(lines[0]["s"].get<double>(), 0.1);
  EXPECT_EQ(lines[0]["detail"]["exclusive"], true);
  EXPECT_EQ(lines[0]["detail"]["stage"], "measurement");
}

TEST_F(ExchangeWaitTrace, AWaitForDeviceMemorySaysWhatItWantedAndWhatWasHeld) {
  WorkerExchange exchange(session_, candidate_, &gate_, limits_);
  exchange.set_stage("reference");
  constexpr double kDevice = 100e9;  // a ledger of 50 GB (kReservableShare)
  auto first = exchange.reserve_memory(40e9, kDevice);
  std::thread releaser([&] {
    std::this_thread::sleep_for(150ms);
    first.release();
  });
  auto second = exchange.reserve_memory(30e9, kDevice);  // waits for the first
  releaser.join();
  EXPECT_TRUE(second.held());
  auto lines = read_lines(path_);
  std::erase_if(lines, [](const nlohmann::json& line) { return line["s"].get<double>() < 0.1; });
  ASSERT_EQ(lines.size(), 1u);  // the first passed at once
  EXPECT_EQ(lines[0]["cmd"], "wait_memory");
  EXPECT_GE(lines[0]["s"].get<double>(), 0.1);
  const auto& detail = lines[0]["detail"];
  EXPECT_DOUBLE_EQ(detail["bytes"].get<double>(), 30e9);
  EXPECT_DOUBLE_EQ(detail["capacity"].get<double>(), 50e9);
  EXPECT_DOUBLE_EQ(detail["reserved_before"].get<double>(), 40e9);
  EXPECT_EQ(detail["waiting_before"], 0);
  EXPECT_EQ(detail["stage"], "reference");
}

}  // namespace
}  // namespace kbv::eval
