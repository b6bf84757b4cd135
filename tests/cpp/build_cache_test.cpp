// The build cache's guard (orchestrate/build_cache.hpp): a library loaded from a candidate's
// cache folder and replaced or changed there afterwards, start-up hooks planted there, and a
// later load of another library than the one first recorded for the same content.
#include "orchestrate/build_cache.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/hash.hpp"

namespace {
namespace fs = std::filesystem;
using kbv::orchestrate::build_cache_changes;
using kbv::orchestrate::loaded_libraries;
using kbv::orchestrate::manifest_mismatches;
using kbv::orchestrate::manifest_path;
using kbv::orchestrate::record_in_manifest;
using nlohmann::json;

class BuildCacheGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kbv-build-cache-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    cache_ = root_ / "torch_extensions" / "abc-cpu";
    fs::create_directories(cache_ / "torch-2" / "ext");
    library_ = cache_ / "torch-2" / "ext" / "ext.so";
    write(library_, "honest library");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  // The worker's record of the library as loaded now.
  json record() const {
    struct stat st {};
    ::stat(library_.c_str(), &st);
    return {{fs::weakly_canonical(library_).string(),
             {{"module", "ext"},
              {"sha256", kbv::sha256_file(library_)},
              {"size", st.st_size},
              {"inode", static_cast<long long>(st.st_ino)}}}};
  }

  fs::path root_, cache_, library_;
};

TEST_F(BuildCacheGuard, AnUntouchedFolderHasNoChanges) {
  auto loaded = loaded_libraries(record(), cache_);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].relative, "torch-2/ext/ext.so");
  EXPECT_TRUE(build_cache_changes(cache_, loaded).empty());
}

TEST_F(BuildCacheGuard, LibrariesOutsideTheFolderAreNotItsConcern) {
  json elsewhere = {{(root_ / "scratch" / "ext.so").string(), {{"sha256", "x"}, {"inode", 1}}}};
  EXPECT_TRUE(loaded_libraries(elsewhere, cache_).empty());
}

TEST_F(BuildCacheGuard, AReplacedLibraryIsAChange) {
  auto loaded = loaded_libraries(record(), cache_);
  write(cache_ / "staged.so", "another library");
  fs::rename(cache_ / "staged.so", library_);  // a new file under the loaded one's name
  auto changes = build_cache_changes(cache_, loaded);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("replaced by another file"), std::string::npos) << changes[0];
}

TEST_F(BuildCacheGuard, AFolderThatCannotBeReadIsSaidToBeIncomplete) {
  auto loaded = loaded_libraries(record(), cache_);
  bool complete = true;
  EXPECT_TRUE(build_cache_changes(cache_, loaded, &complete).empty());
  EXPECT_TRUE(complete);  // an honest, readable folder
  // The folder is now a file: nothing in it can be listed, so what looks removed proves nothing
  // (after a fault of kbv's own, out of descriptors or memory, reads fail the same way).
  fs::remove_all(cache_);
  write(cache_, "not a folder");
  auto changes = build_cache_changes(cache_, loaded, &complete);
  EXPECT_FALSE(changes.empty());
  EXPECT_FALSE(complete);
}

TEST_F(BuildCacheGuard, ARemovedLibraryInAReadableFolderIsComplete) {
  auto loaded = loaded_libraries(record(), cache_);
  fs::remove(library_);
  bool complete = true;
  auto changes = build_cache_changes(cache_, loaded, &complete);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("removed"), std::string::npos) << changes[0];
  EXPECT_TRUE(complete);
}

TEST_F(BuildCacheGuard, ALibraryChangedInPlaceIsAChange) {
  auto loaded = loaded_libraries(record(), cache_);
  write(library_, "honest librarz");  // same inode, other bytes
  auto changes = build_cache_changes(cache_, loaded);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("changed in place"), std::string::npos) << changes[0];
}

TEST_F(BuildCacheGuard, ALibraryReplacedBeforeItsRecordIsAChange) {
  json r = record();
  r.begin().value()["mapped_inode"] = 12345;
  auto changes = build_cache_changes(cache_, loaded_libraries(r, cache_));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("before kbv recorded it"), std::string::npos) << changes[0];
}

TEST_F(BuildCacheGuard, StartUpHooksAnywhereInTheFolderAreChanges) {
  write(cache_ / "torch-2" / "zz.pth", "import os\n");
  write(cache_ / "sitecustomize.py", "print(1)\n");
  write(cache_ / "torch-2" / "ext" / "main.cpp", "// torch's own build products are not hooks\n");
  auto changes = build_cache_changes(cache_, {});
  EXPECT_EQ(changes.size(), 2u);
}

TEST_F(BuildCacheGuard, TheManifestKeepsTheFirstLibraryOfAPath) {
  auto first = loaded_libraries(record(), cache_);
  EXPECT_TRUE(manifest_mismatches(cache_, first).empty());  // no manifest yet
  record_in_manifest(cache_, first);
  EXPECT_TRUE(fs::exists(manifest_path(cache_)));
  EXPECT_EQ(manifest_path(cache_).parent_path(), cache_.parent_path());  // outside the folder
  EXPECT_TRUE(manifest_mismatches(cache_, first).empty());

  write(library_, "swapped library");
  auto later = loaded_libraries(record(), cache_);
  ASSERT_EQ(manifest_mismatches(cache_, later).size(), 1u);
  record_in_manifest(cache_, later);  // never overwrites what it recorded
  EXPECT_EQ(manifest_mismatches(cache_, later).size(), 1u);
}

TEST_F(BuildCacheGuard, BuildsAheadBeforeAndEvaluationsAfterTheOrdinaryCase) {
  // An honest candidate: built ahead, loaded again by its evaluation, the same library.
  auto built = loaded_libraries(record(), cache_);
  record_in_manifest(cache_, built);
  auto evaluated = loaded_libraries(record(), cache_);
  EXPECT_TRUE(manifest_mismatches(cache_, evaluated).empty());
  EXPECT_TRUE(build_cache_changes(cache_, evaluated).empty());
}

}  // namespace
