#include "eval/protocol.hpp"

#include <gtest/gtest.h>

namespace kbv::eval {
namespace {

TEST(Protocol, VerifiedHasNativeAndFourHiddenFamilies) {
  auto p = protocol_by_name("verified", 3);
  ASSERT_EQ(p.families.size(), 5u);
  EXPECT_EQ(p.families[0].name, "native");
  EXPECT_EQ(p.families[1].name, "h1_native");
  EXPECT_EQ(p.families[4].name, "h4_special");
  EXPECT_EQ(p.families[2].draws, 3);
  EXPECT_EQ(p.policy.kind, check::PolicyKind::Scaled);
  EXPECT_TRUE(p.redraw_parameters);
  EXPECT_EQ(p.headline, Headline::Tf32);
}

TEST(Protocol, PaperIsScaledNativeWithAllclose1e3AgainstTf32) {
  auto p = protocol_by_name("kbv-paper");
  ASSERT_EQ(p.families.size(), 4u);
  EXPECT_EQ(p.policy.kind, check::PolicyKind::AllClose);
  EXPECT_DOUBLE_EQ(p.policy.atol, 1e-3);
  EXPECT_EQ(p.reference_variant, "tf32");
  EXPECT_FALSE(p.redraw_parameters);
}

TEST(Protocol, StandardIsKernelBench) {
  auto p = protocol_by_name("standard");
  ASSERT_EQ(p.families.size(), 1u);
  EXPECT_EQ(p.families[0].draws, 5);
  EXPECT_DOUBLE_EQ(p.policy.rtol, 1e-4);
  EXPECT_EQ(p.reference_variant, "fp32");
  EXPECT_EQ(p.headline, Headline::Fp32);
}

TEST(Protocol, UnknownNameIsAnError) {
  EXPECT_THROW(protocol_by_name("fast"), std::invalid_argument);
}

TEST(Protocol, JsonRecordsTheTolerance) {
  auto j = protocol_by_name("verified").to_json();
  EXPECT_EQ(j["name"], "verified");
  EXPECT_TRUE(j.contains("tolerance"));
  EXPECT_EQ(j["judged_against"], "float64_truth");
}

}  // namespace
}  // namespace kbv::eval
