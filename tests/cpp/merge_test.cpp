// `kbv merge`: which result a conflict keeps, and a merge that is idempotent, keeps rows as they
// were stored and loses nothing when it fails.
#include "store/merge.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "store/store.hpp"

namespace {

namespace fs = std::filesystem;
using kbv::store::compare_versions;
using kbv::store::merge_databases;
using kbv::store::MergeError;
using kbv::store::prefer;
using kbv::store::Store;
using kbv::store::StoredResult;
using nlohmann::json;

json result(const std::string& kbv, int protocol, const std::string& verdict = "correct") {
  return {{"kbv_version", kbv},
          {"verdict", verdict},
          {"protocol", {{"name", "verified"}, {"version", protocol}}}};
}

TEST(MergeRule, VersionsCompareAsNumbers) {
  EXPECT_LT(compare_versions("0.9.2", "0.10.0"), 0);
  EXPECT_GT(compare_versions("1.0.0", "0.99.99"), 0);
  EXPECT_EQ(compare_versions("1.2", "1.2.0"), 0);
  EXPECT_EQ(compare_versions("0.4.1", "0.4.1"), 0);
}

TEST(MergeRule, LaterKbvWinsWhateverFinishedLater) {
  const StoredResult old_kbv{result("0.9.0", 1), "2026-12-04T10:00:00Z"};
  const StoredResult new_kbv{result("0.10.0", 1), "2026-01-01T00:00:00Z"};
  auto choice = prefer(old_kbv, new_kbv);
  EXPECT_TRUE(choice.incoming);
  EXPECT_NE(choice.why.find("kbv 0.10.0 is later"), std::string::npos) << choice.why;
  EXPECT_FALSE(prefer(new_kbv, old_kbv).incoming);
}

TEST(MergeRule, ThenLaterProtocolVersion) {
  const StoredResult v1{result("1.0.0", 1), "2026-12-04T10:00:00Z"};
  const StoredResult v2{result("1.0.0", 2), "2026-01-01T00:00:00Z"};
  EXPECT_TRUE(prefer(v1, v2).incoming);
  EXPECT_FALSE(prefer(v2, v1).incoming);
  EXPECT_NE(prefer(v1, v2).why.find("protocol version 2"), std::string::npos);
}

TEST(MergeRule, ThenLaterFinishTimeElseTheOneKept) {
  const StoredResult early{result("1.0.0", 1, "correct"), "2026-12-04T10:00:00Z"};
  const StoredResult late{result("1.0.0", 1, "incorrect"), "2026-12-04T10:00:01Z"};
  EXPECT_TRUE(prefer(early, late).incoming);
  EXPECT_FALSE(prefer(late, early).incoming);
  EXPECT_FALSE(prefer(early, early).incoming);
  EXPECT_NE(prefer(late, early).why.find("finished at 2026-12-04T10:00:01Z"), std::string::npos);
}

class MergeFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::path(testing::TempDir()) /
        ("kbv_merge_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path db(const std::string& name, const std::vector<std::pair<std::string, json>>& rows) {
    const auto path = dir_ / name;
    Store store(path);
    for (const auto& [key, r] : rows) store.put({key, "run", "p_" + key, 1, 1, 0}, r);
    return path;
  }
  // Rewrites a row's finish time, as if it had been evaluated at `when`.
  static void finished_at(const fs::path& path, const std::string& key, const std::string& when) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const auto sql = "UPDATE results SET finished_at = '" + when + "' WHERE key = '" + key + "'";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  static std::map<std::string, std::string> verdicts(const fs::path& path) {
    std::map<std::string, std::string> out;
    for (const auto& r : Store(path).results()) out[r["_row"]["key"]] = r["verdict"];
    return out;
  }

  fs::path dir_;
};

TEST_F(MergeFiles, UnionOfShardsAndIdempotent) {
  const auto a = db("a.sqlite", {{"k1", result("1.0.0", 1)}, {"k2", result("1.0.0", 1)}});
  const auto b = db("b.sqlite", {{"k3", result("1.0.0", 1, "incorrect")}});
  const auto all = dir_ / "all.sqlite";
  auto summary = merge_databases({a, b}, all);
  EXPECT_EQ(summary.rows, 3);
  EXPECT_TRUE(summary.conflicts.empty());
  const auto once = verdicts(all);
  EXPECT_EQ(once.size(), 3u);
  EXPECT_EQ(once.at("k3"), "incorrect");

  // The same input twice, an overlapping one, the merged file again: nothing twice.
  const auto again = dir_ / "again.sqlite";
  summary = merge_databases({all, a, b, a}, again);
  EXPECT_EQ(summary.rows, 3);
  EXPECT_EQ(summary.read, 8);
  EXPECT_EQ(summary.duplicates, 5);  // all that was read but the 3 rows kept
  EXPECT_TRUE(summary.conflicts.empty());
  EXPECT_EQ(verdicts(again), once);
}

TEST_F(MergeFiles, RowsKeepTheirFinishTime) {
  const auto a = db("a.sqlite", {{"k1", result("1.0.0", 1)}});
  finished_at(a, "k1", "2020-01-01T00:00:00Z");
  const auto all = dir_ / "all.sqlite";
  merge_databases({a}, all);
  EXPECT_EQ(Store(all).results().at(0)["_row"]["finished_at"], "2020-01-01T00:00:00Z");
}

TEST_F(MergeFiles, ConflictKeepsTheLaterAndSaysWhich) {
  const auto a = db("a.sqlite", {{"k1", result("1.0.0", 1, "correct")}});
  const auto b = db("b.sqlite", {{"k1", result("1.0.0", 1, "incorrect")}});
  finished_at(a, "k1", "2026-12-04T10:00:00Z");
  finished_at(b, "k1", "2026-12-04T11:00:00Z");
  for (const auto& order : {std::vector{a, b}, std::vector{b, a}}) {
    const auto all = dir_ / "all.sqlite";
    auto summary = merge_databases(order, all);
    ASSERT_EQ(summary.conflicts.size(), 1u);
    EXPECT_EQ(summary.conflicts[0].kept_from, b);
    EXPECT_EQ(summary.conflicts[0].dropped_from, a);
    EXPECT_EQ(verdicts(all).at("k1"), "incorrect");
  }
}

TEST_F(MergeFiles, MetaCarried) {
  const auto a = db("a.sqlite", {{"k1", result("1.0.0", 1)}});
  const auto all = dir_ / "all.sqlite";
  merge_databases({a}, all);
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(all.c_str(), &handle), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(handle, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &q,
                     nullptr);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))),
            std::to_string(kbv::store::kSchemaVersion));
  sqlite3_finalize(q);
  sqlite3_close(handle);
}

// A shard's record of the problems that need a device's memory to itself goes into the merged
// database (a rerun over it orders them last from its start), once however often merged; a
// database from before the table existed merges as before.
TEST_F(MergeFiles, ProblemsNeedingADeviceAloneCarried) {
  const auto a = db("a.sqlite", {{"k1", result("1.0.0", 1)}});
  const auto b = db("b.sqlite", {{"k2", result("1.0.0", 1)}});
  const auto old = db("old.sqlite", {{"k3", result("1.0.0", 1)}});
  Store(a).remember_device_alone("problem-1", 86e9, 12e9);
  Store(b).remember_device_alone("problem-1", 86e9, 12e9);  // the same problem on another shard
  Store(b).remember_device_alone("problem-2", 90e9, 30e9);
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(old.c_str(), &handle), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(handle, "DROP TABLE device_alone", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(handle);

  const auto all = dir_ / "all.sqlite";
  const auto summary = merge_databases({a, old, b, a}, all);
  EXPECT_EQ(summary.rows, 3);
  EXPECT_EQ(summary.device_alone, 2);
  const auto remembered = Store(all).problems_needing_device_alone();
  ASSERT_EQ(remembered.size(), 2u);
  EXPECT_DOUBLE_EQ(remembered.at("problem-1"), 86e9);
  EXPECT_DOUBLE_EQ(remembered.at("problem-2"), 90e9);
  EXPECT_TRUE(Store(dir_ / "none.sqlite").problems_needing_device_alone().empty());
  EXPECT_EQ(merge_databases({old}, dir_ / "old-only.sqlite").device_alone, 0);
}

TEST_F(MergeFiles, BadInputsLoseNothing) {
  const auto a = db("a.sqlite", {{"k1", result("1.0.0", 1)}});
  const auto out = dir_ / "out.sqlite";
  merge_databases({a}, out);
  const auto before = fs::file_size(out);
  const auto text = dir_ / "notes.sqlite";
  std::ofstream(text) << "not a database, just a long enough line of text to be a header\n";
  sqlite3* other = nullptr;  // a SQLite file that is not kbv's
  const auto foreign = dir_ / "foreign.sqlite";
  sqlite3_open(foreign.c_str(), &other);
  sqlite3_exec(other, "CREATE TABLE t (x)", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  for (const auto& bad : {dir_ / "missing.sqlite", text, foreign}) {
    EXPECT_THROW(merge_databases({a, bad}, out), MergeError) << bad;
    EXPECT_EQ(fs::file_size(out), before);
    EXPECT_EQ(verdicts(out).size(), 1u);
  }
  EXPECT_THROW(merge_databases({a, out}, out), MergeError);
  EXPECT_THROW(merge_databases({}, out), MergeError);
  EXPECT_EQ(verdicts(out).size(), 1u);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

}  // namespace
