// Work folders and their owners: a folder in use is never reclaimed, one a killed kbv left is,
// and a kept one (--keep-work-dir) or one that is not kbv's stays.
#include "eval/workspace.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>

namespace kbv::eval {
namespace {
namespace fs = std::filesystem;

fs::path temp_root() {
  auto dir =
      fs::temp_directory_path() /
      ("kbv-ws-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  fs::create_directories(dir);
  return dir;
}

TEST(Workspace, FoldersInUseStayAbandonedOnesAreReclaimed) {
  auto root = temp_root();
  std::optional<PrivateDir> live = make_private_dir(root, "kbv-run", {"inputs"}, false);
  std::optional<PrivateDir> dead = make_private_dir(root, "kbv-cand", {"scratch"}, false);
  std::ofstream(dead->path / "scratch" / "big.bin") << std::string(4096, 'x');
  const fs::path dead_path = dead->path;
  dead.reset();  // its owner is gone, as when kbv is killed
  std::error_code ec;
  EXPECT_TRUE(fs::exists(dead_path));  // the folder itself was not removed
  auto reclaimed = reclaim_abandoned_folders(root);
  EXPECT_EQ(reclaimed.folders, 1);
  EXPECT_GE(reclaimed.bytes, 4096u);
  EXPECT_FALSE(fs::exists(dead_path));
  EXPECT_TRUE(fs::exists(live->path / "inputs"));  // locked by this process: in use
  live.reset();
  fs::remove_all(root, ec);
}

TEST(Workspace, KeptFoldersAndForeignFoldersAreLeftAlone) {
  auto root = temp_root();
  fs::path kept;
  {
    auto dir = make_private_dir(root, "kbv-run", {}, /*keep=*/true);
    kept = dir.path;
  }
  fs::create_directories(work_root(root) / "kbv-something-else");  // no owner file
  fs::create_directories(root / "kbv-build-123");
  { FolderOwner build(root / "kbv-build-123", false); }  // a killed run's build scratch
  auto reclaimed = reclaim_abandoned_folders(root);
  EXPECT_EQ(reclaimed.folders, 1);
  EXPECT_FALSE(fs::exists(root / "kbv-build-123"));
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_TRUE(fs::exists(work_root(root) / "kbv-something-else"));
  std::error_code ec;
  fs::remove_all(root, ec);
}

TEST(Workspace, AnEmptyOrMissingRootReclaimsNothing) {
  auto parent = temp_root();
  EXPECT_EQ(reclaim_abandoned_folders(parent / "absent").folders, 0);
  EXPECT_EQ(reclaim_abandoned_folders(parent).folders, 0);
  std::error_code ec;
  fs::remove_all(parent, ec);
}

}  // namespace
}  // namespace kbv::eval
