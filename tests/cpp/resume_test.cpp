// What a rerun of kbv run does with a stored result (schedule/resume.hpp), and the store key's
// settings part (EvalSettings::key): limits are not in the key; a stored timeout is evaluated
// again only under a longer timeout than it ran under.
#include "schedule/resume.hpp"

#include <gtest/gtest.h>

#include "eval/eval_request.hpp"
#include "eval/protocol.hpp"

namespace kbv::schedule {
namespace {
using nlohmann::json;

json stored(const std::string& verdict, int compile_s, int call_s) {
  return {{"verdict", verdict},
          {"limits", {{"compile_timeout_s", compile_s}, {"call_timeout_s", call_s}}}};
}

eval::EvalLimits limits(int compile_s, int call_s) {
  eval::EvalLimits l;
  l.compile_timeout = std::chrono::seconds(compile_s);
  l.call_timeout = std::chrono::seconds(call_s);
  return l;
}

TEST(Resume, StoredTimeoutIsEvaluatedAgainOnlyUnderALongerTimeout) {
  EXPECT_FALSE(evaluate_again(stored("timeout", 900, 120), limits(900, 120)));
  EXPECT_FALSE(evaluate_again(stored("timeout", 900, 120), limits(600, 60)));
  EXPECT_TRUE(evaluate_again(stored("timeout", 900, 120), limits(900, 600)));
  EXPECT_TRUE(evaluate_again(stored("timeout", 900, 120), limits(1800, 120)));
}

TEST(Resume, StoredHarnessErrorIsAlwaysEvaluatedAgain) {
  EXPECT_TRUE(evaluate_again(stored("harness_error", 900, 120), limits(900, 120)));
  EXPECT_TRUE(evaluate_again(json{{"verdict", "harness_error"}}, limits(1, 1)));
}

TEST(Resume, OtherVerdictsAndOldRowsAreKept) {
  for (const char* verdict :
       {"correct", "incorrect", "rejected", "compile_error", "runtime_error"}) {
    EXPECT_FALSE(evaluate_again(stored(verdict, 900, 120), limits(9000, 9000))) << verdict;
  }
  // Written before results recorded their limits: kept as they are.
  EXPECT_FALSE(evaluate_again(json{{"verdict", "timeout"}}, limits(9000, 9000)));
}

TEST(StoreKey, LimitsAndPlacementAreNotInTheKeySettingsAre) {
  eval::EvalRequest a, b;
  b.limits = limits(1, 1);
  b.placement.work_dir = "/elsewhere";
  b.settings.device = "cuda:1";
  a.settings.device = "cuda:0";
  EXPECT_EQ(a.settings.key(), b.settings.key());  // same device kind, limits apart
  b.settings.hidden_draws = 5;
  EXPECT_NE(a.settings.key(), b.settings.key());
  eval::EvalSettings unsandboxed;
  unsandboxed.sandbox = false;
  EXPECT_NE(eval::EvalSettings{}.key(), unsandboxed.key());
  EXPECT_FALSE(eval::EvalSettings{}.key().contains("sandbox"));  // earlier databases' keys hold
  // --allow-library changes verdicts (no_custom_kernel, library_main_op as warnings): keyed
  // apart, and only when on, so results stored before the option existed keep their keys.
  eval::EvalSettings library;
  library.allow_library = true;
  EXPECT_NE(eval::EvalSettings{}.key(), library.key());
  EXPECT_EQ(library.key()["allow_library"], true);
  EXPECT_FALSE(eval::EvalSettings{}.key().contains("allow_library"));
}

// A result judged by older rules of its protocol is evaluated again on resume: the verified
// protocol's version is in the key (a version 2 result, keyed without it, no longer matches),
// and version 1 protocols keep the keys they always had.
TEST(StoreKey, TheProtocolsVersionIsInTheKeyFromVersion2On) {
  eval::EvalSettings verified;
  verified.protocol = "verified";
  EXPECT_EQ(verified.key()["protocol_version"], eval::protocol_by_name("verified", 3).version);
  EXPECT_GE(verified.key()["protocol_version"].get<int>(), 3);
  eval::EvalSettings standard;
  standard.protocol = "standard";
  EXPECT_FALSE(standard.key().contains("protocol_version"));
  eval::EvalSettings unknown;
  unknown.protocol = "no-such-protocol";
  EXPECT_FALSE(unknown.key().contains("protocol_version"));
}

}  // namespace
}  // namespace kbv::schedule
