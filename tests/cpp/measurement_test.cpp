#include "eval/measurement.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "stats/sampling.hpp"
#include "stats/summary.hpp"

namespace kbv::eval {
namespace {
using nlohmann::json;

// A fake pair of workers: every side's "time" call returns `calls` samples around the side's
// true time, with a relative spread that shrinks as 1/sqrt(n) only through the median's interval.
struct FakeWorkers {
  std::map<std::string, double> mean = {{"tf32", 1.0}, {"cand", 0.5}, {"fp32", 2.0}};
  double spread = 0.0;             // relative, deterministic saw-tooth
  std::vector<std::string> calls;  // "who:cmd" in call order
  double clock = 0.0;
  double seconds_per_call = 0.0;
  int fail_after = -1;
  json throttle = json{{"status", "ok"}, {"kept", 0}, {"sm_clock_mhz", json::array()}};
  int counter = 0;

  SideCall side_call() {
    return [this](const std::string& who, const json& request) -> std::optional<json> {
      std::string cmd = request["cmd"];
      calls.push_back(who + ":" + cmd);
      if (fail_after >= 0 && static_cast<int>(calls.size()) > fail_after) return std::nullopt;
      clock += seconds_per_call;
      json out;
      int n = request.value("calls", 0);
      std::vector<double> v;
      for (int i = 0; i < n; ++i) {
        double wiggle = spread * (((counter++ * 7) % 11) - 5) / 5.0;
        v.push_back(mean[who] * (1.0 + wiggle));
      }
      if (cmd == "time") {
        out["samples_ms"] = v;
        out["method"] = "fake";
        json t = throttle;
        t["kept"] = n;
        t["sm_clock_mhz"] = std::vector<double>(static_cast<size_t>(n), 1980.0);
        out["throttle"] = t;
        if (request.value("steady_warmup", false)) out["warmup"] = {{"batches", 2}};
      } else if (cmd == "time_secondary") {
        out["host_inclusive_ms"] = std::vector<double>(static_cast<size_t>(n), mean[who] + 0.02);
        out["hot_ms"] = std::vector<double>(static_cast<size_t>(n), mean[who] * 0.9);
      } else if (cmd == "kernel_audit") {
        out["event_ms"] = std::vector<double>(static_cast<size_t>(n), mean[who]);
        out["kernel_span_ms"] = std::vector<double>(static_cast<size_t>(n), mean[who] * 0.95);
      }
      return out;
    };
  }
  std::function<double()> now() {
    return [this] { return clock; };
  }
};

TEST(Measurement, ProfileGivesAnAdaptivePlanAndExplicitCountsAFixedOne) {
  auto adaptive = plan_timing("standard", 0, 0, true);
  EXPECT_TRUE(adaptive.adaptive);
  EXPECT_EQ(adaptive.per_round, stats::profile_by_name("standard").round_size);
  EXPECT_EQ(adaptive.audit_calls, 5);
  auto fixed = plan_timing("standard", 30, 3, true);
  EXPECT_FALSE(fixed.adaptive);
  EXPECT_EQ(fixed.rounds, 3);
  EXPECT_EQ(fixed.per_round, 10);
  auto only_samples = plan_timing("quick", 15, 0, false);
  EXPECT_FALSE(only_samples.adaptive);
  EXPECT_EQ(only_samples.rounds, 3);
  EXPECT_EQ(only_samples.per_round, 5);
  EXPECT_EQ(only_samples.audit_calls, 0);  // no kernel audit on the CPU
  EXPECT_THROW(plan_timing("sloppy", 0, 0, true), std::invalid_argument);
}

TEST(Measurement, RoundsAreInterleavedAbba) {
  FakeWorkers w;
  auto plan = plan_timing("quick", 6, 3, false);
  plan.secondary_calls = 0;
  auto run = run_timing(plan, w.side_call(), false, {}, w.now());
  ASSERT_TRUE(run.ok);
  std::vector<std::string> expected = {"tf32:time", "cand:time", "fp32:time",
                                       "fp32:time", "cand:time", "tf32:time",
                                       "tf32:time", "cand:time", "fp32:time"};
  EXPECT_EQ(w.calls, expected);
  EXPECT_EQ(run.samples["cand"].size(), 6u);
  EXPECT_EQ(run.timing["rounds"], 3);
  EXPECT_EQ(run.timing["stop_reason"], "max_samples");
}

TEST(Measurement, SteadySamplesStopAtTheMinimumAsPrecise) {
  FakeWorkers w;  // no spread: every interval has zero width
  auto plan = plan_timing("standard", 0, 0, true);
  auto run = run_timing(plan, w.side_call(), true, {}, w.now());
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(run.timing["stop_reason"], "precise");
  EXPECT_EQ(run.samples["cand"].size(), static_cast<size_t>(plan.profile.min_samples));
  EXPECT_NEAR(run.timing["candidate"]["median_ms"].get<double>(), 0.5, 1e-12);
}

TEST(Measurement, NoisySamplesGoOnUntilTheSampleCap) {
  FakeWorkers w;
  w.spread = 0.2;  // +-20%: the median's interval never gets within 0.5% at 300 samples
  auto plan = plan_timing("standard", 0, 0, true);
  auto run = run_timing(plan, w.side_call(), true, {}, w.now());
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(run.timing["stop_reason"], "max_samples");
  EXPECT_EQ(run.samples["cand"].size(), static_cast<size_t>(plan.profile.max_samples));
}

TEST(Measurement, NoisySamplesStopAtTheTimeBudget) {
  FakeWorkers w;
  w.spread = 0.2;
  w.seconds_per_call = 1.0;  // 3 calls a round: the 20 s budget ends in round 7
  auto plan = plan_timing("standard", 0, 0, true);
  auto run = run_timing(plan, w.side_call(), true, {}, w.now());
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(run.timing["stop_reason"], "budget");
  EXPECT_EQ(run.timing["rounds"], 7);
  EXPECT_LT(run.samples["cand"].size(), static_cast<size_t>(plan.profile.max_samples));
}

TEST(Measurement, ModerateNoiseStopsOnceTheSpeedupIsPrecise) {
  FakeWorkers w;
  w.spread = 0.01;  // +-1%: precise after some rounds, before the cap
  auto plan = plan_timing("standard", 0, 0, true);
  auto run = run_timing(plan, w.side_call(), true, {}, w.now());
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(run.timing["stop_reason"], "precise");
  EXPECT_LE(run.timing["speedup_relative_half_width"]["vs_tf32"].get<double>(), 0.005);
  EXPECT_LE(run.timing["speedup_relative_half_width"]["vs_fp32"].get<double>(), 0.005);
}

TEST(Measurement, SecondaryFiguresAndAuditSitBesideTheHeadline) {
  FakeWorkers w;
  auto plan = plan_timing("quick", 0, 0, true);
  auto run = run_timing(plan, w.side_call(), true, {}, w.now());
  ASSERT_TRUE(run.ok);
  const auto& cand = run.timing["candidate"];
  EXPECT_NEAR(cand["host_inclusive"]["median_ms"].get<double>(), 0.52, 1e-12);
  EXPECT_NEAR(cand["hot"]["median_ms"].get<double>(), 0.45, 1e-12);
  EXPECT_EQ(cand["kernel_audit"]["kernel_span_ms"].size(), 5u);
  EXPECT_TRUE(run.timing["baseline_tf32"].contains("kernel_audit"));
  EXPECT_FALSE(run.timing["baseline_fp32"].contains("kernel_audit"));
  EXPECT_EQ(run.timing["warmup"]["candidate"]["batches"], 2);
  EXPECT_EQ(cand["throttle"]["status"], "ok");
  EXPECT_EQ(cand["throttle"]["samples"].get<size_t>(), run.samples["cand"].size());
}

TEST(Measurement, CpuThrottleIsNotApplicable) {
  FakeWorkers w;
  auto plan = plan_timing("quick", 4, 2, false);
  auto run = run_timing(plan, w.side_call(), false, {}, w.now());
  ASSERT_TRUE(run.ok);
  EXPECT_EQ(run.timing["candidate"]["throttle"]["status"], "not_applicable");
  EXPECT_FALSE(run.timing["candidate"].contains("kernel_audit"));
}

TEST(Measurement, AFailedCallStopsTheLoop) {
  FakeWorkers w;
  w.fail_after = 4;
  auto plan = plan_timing("standard", 0, 0, true);
  auto run = run_timing(plan, w.side_call(), true, {}, w.now());
  EXPECT_FALSE(run.ok);
  EXPECT_EQ(w.calls.size(), 5u);
}

TEST(Measurement, ThrottleReportsMerge) {
  json a = {{"status", "ok"},
            {"kept", 10},
            {"discarded", 2},
            {"power_capped", 3},
            {"reasons", {{"sw_power_cap", 3}}},
            {"discarded_reasons", {{"hw_slowdown", 2}}},
            {"sm_clock_mhz", {1980, 1470, 1980}}};
  json b = {{"status", "ok"},
            {"kept", 5},
            {"discarded", 0},
            {"power_capped", 1},
            {"reasons", {{"sw_power_cap", 1}, {"gpu_idle", 1}}},
            {"retries_exhausted", true},
            {"sm_clock_mhz", {1755}}};
  auto m = merge_throttle({a, b});
  EXPECT_EQ(m["status"], "ok");
  EXPECT_EQ(m["samples"], 15);
  EXPECT_EQ(m["discarded"], 2);
  EXPECT_EQ(m["power_capped"], 4);
  EXPECT_EQ(m["reasons"]["sw_power_cap"], 4);
  EXPECT_EQ(m["reasons"]["gpu_idle"], 1);
  EXPECT_EQ(m["discarded_reasons"]["hw_slowdown"], 2);
  EXPECT_TRUE(m["retries_exhausted"].get<bool>());
  EXPECT_DOUBLE_EQ(m["sm_clock_mhz"]["min"].get<double>(), 1470);
  EXPECT_DOUBLE_EQ(m["sm_clock_mhz"]["max"].get<double>(), 1980);
  auto none = merge_throttle({json{{"status", "unavailable"}, {"why", "no libnvidia-ml"}}});
  EXPECT_EQ(none["status"], "unavailable");
  EXPECT_EQ(none["why"], "no libnvidia-ml");
  EXPECT_TRUE(none["sm_clock_mhz"].is_null());
}

}  // namespace
}  // namespace kbv::eval
