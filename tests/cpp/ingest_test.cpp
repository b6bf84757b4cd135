// `kbv run --ray` stores each row a node streams back with store::ingest_row: idempotent by key
// (a row relayed twice, or by a retried shard, is stored once), merge's rule on a conflict, and
// the row as the node stored it (its finish time too).
#include "store/ingest.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "store/store.hpp"

namespace {

namespace fs = std::filesystem;
using kbv::store::ingest_row;
using kbv::store::Ingested;
using kbv::store::IngestError;
using kbv::store::Store;
using nlohmann::json;

// A line of `kbv export`: the result with its row info.
json exported(const std::string& key, const std::string& verdict, const std::string& finished,
              const std::string& kbv = "1.0.0") {
  return {{"kbv_version", kbv},
          {"verdict", verdict},
          {"protocol", {{"name", "verified"}, {"version", 1}}},
          {"candidate", {{"path", "/node/cands/run/level1/3_ReLU.py"}, {"sha256", "c"}}},
          {"_row",
           {{"key", key},
            {"run", "run"},
            {"problem", "3_ReLU"},
            {"level", 1},
            {"problem_id", 3},
            {"sample", nullptr},
            {"finished_at", finished}}}};
}

class Ingest : public testing::Test {
 protected:
  void SetUp() override {
    path_ =
        fs::path(testing::TempDir()) /
        ("kbv_ingest_" +
         std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + ".sqlite");
    fs::remove(path_);
  }
  void TearDown() override {
    for (const char* side : {"", "-wal", "-shm"}) fs::remove(path_.string() + side);
  }
  fs::path path_;
};

TEST_F(Ingest, StoresTheRowAsTheNodeStoredIt) {
  Store db(path_);
  const auto row = exported("k1", "correct", "2026-12-04T10:00:00Z");
  EXPECT_EQ(ingest_row(db, row).outcome, Ingested::Outcome::Stored);
  const auto results = db.results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["_row"]["finished_at"], "2026-12-04T10:00:00Z");
  EXPECT_EQ(results[0]["_row"]["run"], "run");
  EXPECT_EQ(results[0]["_row"]["problem_id"], 3);
  EXPECT_TRUE(results[0]["_row"]["sample"].is_null());
  json stored = *db.get("k1");
  EXPECT_FALSE(stored.contains("_row"));  // the row info is columns, not part of the result
  EXPECT_EQ(stored["verdict"], "correct");
}

TEST_F(Ingest, TheSameRowTwiceIsStoredOnce) {
  Store db(path_);
  const auto row = exported("k1", "correct", "2026-12-04T10:00:00Z");
  ASSERT_TRUE(ingest_row(db, row).written());
  const auto again = ingest_row(db, row);
  EXPECT_EQ(again.outcome, Ingested::Outcome::Duplicate);
  EXPECT_FALSE(again.written());
  EXPECT_EQ(db.count(), 1);
}

TEST_F(Ingest, ADifferentResultFollowsMergesRule) {
  Store db(path_);
  ASSERT_TRUE(ingest_row(db, exported("k1", "correct", "2026-12-04T10:00:00Z")).written());
  // Finished earlier: the stored one stays.
  auto older = ingest_row(db, exported("k1", "incorrect", "2026-12-04T09:00:00Z"));
  EXPECT_EQ(older.outcome, Ingested::Outcome::KeptStored);
  EXPECT_EQ((*db.get("k1"))["verdict"], "correct");
  // A later kbv: replaces it, whatever its time.
  auto newer = ingest_row(db, exported("k1", "incorrect", "2026-01-01T00:00:00Z", "2.0.0"));
  EXPECT_EQ(newer.outcome, Ingested::Outcome::Replaced);
  EXPECT_NE(newer.why.find("kbv 2.0.0 is later"), std::string::npos) << newer.why;
  EXPECT_EQ((*db.get("k1"))["verdict"], "incorrect");
  EXPECT_EQ(db.count(), 1);
}

TEST_F(Ingest, AResultEvaluatedAgainReplacesTheStoredOneWhateverTheClocks) {
  Store db(path_);
  ASSERT_TRUE(ingest_row(db, exported("k1", "timeout", "2026-12-04T10:00:00Z")).written());
  // The node's clock is behind: by merge's rule the stored timeout would stay.
  const auto again = exported("k1", "correct", "2026-12-04T09:00:00Z");
  EXPECT_EQ(ingest_row(db, again, /*evaluated_again=*/true).outcome, Ingested::Outcome::Replaced);
  EXPECT_EQ((*db.get("k1"))["verdict"], "correct");
  EXPECT_EQ(*db.finished_at("k1"), "2026-12-04T09:00:00Z");
  EXPECT_EQ(ingest_row(db, again, true).outcome, Ingested::Outcome::Duplicate);
}

TEST_F(Ingest, ARowWithoutItsRowInfoIsRefused) {
  Store db(path_);
  EXPECT_THROW(ingest_row(db, json{{"verdict", "correct"}}), IngestError);
  auto keyless = exported("", "correct", "2026-12-04T10:00:00Z");
  EXPECT_THROW(ingest_row(db, keyless), IngestError);
  EXPECT_EQ(db.count(), 0);
}

}  // namespace
