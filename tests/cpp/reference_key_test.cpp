// The key of shared reference work: any change of what the reference's cases, golden outputs
// and baseline depend on gives another key; the same inputs give the same key.
#include <gtest/gtest.h>

#include <functional>

#include "eval/reference_session.hpp"

namespace kbv::eval {
namespace {

ReferenceKey base() {
  ReferenceKey k;
  k.problem_sha256 = "aa";
  k.device = "cuda:0";
  k.protocol = "verified";
  k.protocol_version = 2;
  k.draws = 3;
  k.size = "large";
  k.kbv_version = "0.1.0";
  k.software = {{"torch", "2.11.0"}, {"cuda_runtime", "13.0"}, {"driver", "580.1"}};
  k.secret_sha256 = "ss";
  return k;
}

TEST(ReferenceKey, SameInputsSameDigest) {
  EXPECT_EQ(base().digest(), base().digest());
  EXPECT_TRUE(base().same_request(base()));
  EXPECT_EQ(base().digest().size(), 64u);
}

TEST(ReferenceKey, EveryFieldChangesTheDigest) {
  std::vector<std::function<void(ReferenceKey&)>> changes = {
      [](ReferenceKey& k) { k.problem_sha256 = "ab"; },
      [](ReferenceKey& k) { k.device = "cuda:1"; },
      [](ReferenceKey& k) { k.protocol = "standard"; },
      [](ReferenceKey& k) { k.protocol_version = 3; },
      [](ReferenceKey& k) { k.draws = 4; },
      [](ReferenceKey& k) { k.size = "small"; },
      [](ReferenceKey& k) { k.kbv_version = "0.2.0"; },
      [](ReferenceKey& k) { k.software["torch"] = "2.12.0"; },
      [](ReferenceKey& k) { k.software["driver"] = "581.0"; },
      [](ReferenceKey& k) { k.secret_sha256 = "st"; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    auto k = base();
    changes[i](k);
    EXPECT_NE(k.digest(), base().digest()) << "change " << i;
  }
}

TEST(ReferenceKey, SameRequestIgnoresOnlyTheSessionsOwnFields) {
  // Software and secret belong to a live session; everything else must match to reuse it.
  auto k = base();
  k.software = nlohmann::json::object();
  k.secret_sha256 = "";
  EXPECT_TRUE(k.same_request(base()));
  k.problem_sha256 = "ab";
  EXPECT_FALSE(k.same_request(base()));
  auto d = base();
  d.device = "cuda:1";
  EXPECT_FALSE(d.same_request(base()));
  auto p = base();
  p.protocol_version = 1;
  EXPECT_FALSE(p.same_request(base()));
}

TEST(ReferenceKey, SoftwareKeepsVersionsNotClocks) {
  nlohmann::json env = {{"torch", "2.11.0"},     {"cuda_runtime", "13.0"}, {"driver", "580"},
                        {"device_name", "H200"}, {"sm_clock_mhz", 1980},   {"python", "3.12"}};
  auto s = software_of(env);
  EXPECT_EQ(s["torch"], "2.11.0");
  EXPECT_EQ(s["device_name"], "H200");
  EXPECT_FALSE(s.contains("sm_clock_mhz"));  // a clock reading must not end a session
  EXPECT_TRUE(software_of(nullptr).empty());
}

}  // namespace
}  // namespace kbv::eval
