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

}  // namespace
