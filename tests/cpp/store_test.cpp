// The results database keeps every row whatever text a candidate managed to put in it.
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace {

TEST(Store, InvalidUtf8InAResultIsReplacedNotThrown) {
  // A reason quoting bytes of a file the candidate spoiled: not valid UTF-8.
  const auto path = std::filesystem::path(testing::TempDir()) / "store_utf8_test.sqlite";
  std::filesystem::remove(path);
  nlohmann::json result = {{"verdict", "rejected"},
                           {"reason", std::string("header \xff\xfe bytes")},
                           {"problem", {{"name", "p"}}}};
  {
    kbv::store::Store db(path);
    ASSERT_NO_THROW(db.put({"k1", "run", "p", 1, 1, 0}, result));
    EXPECT_TRUE(db.has("k1"));
  }
  kbv::store::Store db(path);
  const auto rows = db.results();
  ASSERT_EQ(rows.size(), 1u);
  const std::string reason = rows[0].at("reason");
  EXPECT_NE(reason.find("header "), std::string::npos);
  EXPECT_EQ(reason.find('\xff'), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Store, ProblemsNeedingADeviceAloneAreRememberedAcrossOpenings) {
  const auto path = std::filesystem::path(testing::TempDir()) / "store_alone_test.sqlite";
  std::filesystem::remove(path);
  {
    kbv::store::Store db(path);
    EXPECT_TRUE(db.problems_needing_device_alone().empty());
    db.remember_device_alone("aaa", 80e9, 58e9);
    db.remember_device_alone("aaa", 80e9, 59e9);  // the same device again: one row, the latest
    db.remember_device_alone("aaa", 141e9, 71e9);
    db.remember_device_alone("bbb", 80e9, 45e9);
    EXPECT_EQ(db.count(), 0);  // a hint, not a result
  }
  kbv::store::Store db(path);  // a rerun over the same database
  const auto remembered = db.problems_needing_device_alone();
  ASSERT_EQ(remembered.size(), 2u);
  EXPECT_DOUBLE_EQ(remembered.at("aaa"), 141e9);  // the largest device it needed alone
  EXPECT_DOUBLE_EQ(remembered.at("bbb"), 80e9);
  std::filesystem::remove(path);
}

}  // namespace
