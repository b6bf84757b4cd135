#include "judge/state_match.hpp"

#include <gtest/gtest.h>

namespace kbv::judge {
namespace {

nlohmann::json t(std::vector<int> shape, std::string dtype = "float32") {
  return {{"shape", shape}, {"dtype", dtype}};
}

TEST(StateMatch, SameNamesMatch) {
  nlohmann::json ref = {{"w", t({4, 4})}, {"b", t({4})}};
  auto m = match_state(ref, ref);
  EXPECT_EQ(m.mapping.size(), 2u);
  EXPECT_TRUE(m.unmatched_reference.empty());
  EXPECT_TRUE(m.renamed.empty());
}

TEST(StateMatch, UniqueShapeMatchesAcrossRenames) {
  nlohmann::json ref = {{"linear.weight", t({8, 4})}, {"scale", t({8})}};
  nlohmann::json cand = {{"weight", t({8, 4})}, {"scale", t({8})}};
  auto m = match_state(ref, cand);
  EXPECT_EQ(m.mapping.at("linear.weight"), "weight");
  EXPECT_EQ(m.mapping.at("scale"), "scale");
  EXPECT_EQ(m.renamed.size(), 1u);
}

TEST(StateMatch, AmbiguousShapesStayUnmatched) {
  nlohmann::json ref = {{"a", t({4})}, {"b", t({4})}};
  nlohmann::json cand = {{"x", t({4})}, {"y", t({4})}};
  auto m = match_state(ref, cand);
  EXPECT_TRUE(m.mapping.empty());
  EXPECT_EQ(m.unmatched_reference.size(), 2u);
}

TEST(StateMatch, ShapeOrDtypeMismatchIsNotAMatch) {
  nlohmann::json ref = {{"w", t({4, 4})}, {"n", t({}, "int64")}};
  nlohmann::json cand = {{"w", t({4, 5})}, {"n", t({}, "int32")}};
  auto m = match_state(ref, cand);
  EXPECT_TRUE(m.mapping.empty());
  // Integer buffers (counters) are not re-drawn, so they are not reported as unmatched.
  ASSERT_EQ(m.unmatched_reference.size(), 1u);
  EXPECT_EQ(m.unmatched_reference[0], "w");
}

}  // namespace
}  // namespace kbv::judge
