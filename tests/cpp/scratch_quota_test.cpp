// The scratch quota's accounting: allocated bytes of a folder (hard links once, symbolic links
// and holes not counted), the watchdog's verdict only over the quota, and a tmpfs in another
// process's mount namespace read through /proc/<pid>/root.
#include "orchestrate/scratch_quota.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

namespace kbv::orchestrate {
namespace {
namespace fs = std::filesystem;

class ScratchQuota : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kbv-quota-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Written for real (random bytes), so every block is allocated.
  static void write_file(const fs::path& path, size_t bytes) {
    std::mt19937 rng(7);
    std::string data(bytes, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(bytes));
  }

  fs::path dir_;
};

constexpr unsigned long long kMiB = 1ULL << 20;

TEST_F(ScratchQuota, MissingOrEmptyFolder) {
  EXPECT_EQ(directory_usage(dir_ / "absent").bytes, 0u);
  auto empty = directory_usage(dir_);
  EXPECT_EQ(empty.entries, 0u);
  EXPECT_LT(empty.bytes, 64 * 1024u);  // the folder's own block(s) at most
}

TEST_F(ScratchQuota, SumsNestedFilesOnce) {
  fs::create_directories(dir_ / "a" / "b");
  write_file(dir_ / "one", kMiB);
  write_file(dir_ / "a" / "two", kMiB);
  write_file(dir_ / "a" / "b" / "three", kMiB);
  fs::create_hard_link(dir_ / "one", dir_ / "a" / "one_again");
  auto usage = directory_usage(dir_);
  EXPECT_EQ(usage.entries, 6u);  // a, a/b, three files, one hard link
  EXPECT_GE(usage.bytes, 3 * kMiB);
  EXPECT_LT(usage.bytes, 3 * kMiB + 256 * 1024);  // the hard link adds nothing
}

TEST_F(ScratchQuota, NeitherSymlinkTargetsNorHolesCount) {
  auto outside = dir_.string() + "-outside";
  fs::create_directories(outside);
  write_file(fs::path(outside) / "big", 4 * kMiB);
  fs::create_directory_symlink(outside, dir_ / "link_to_dir");
  fs::create_symlink(fs::path(outside) / "big", dir_ / "link_to_file");
  {
    // 1 GiB apparent size, nothing allocated.
    int fd = ::open((dir_ / "sparse").c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 1LL << 30), 0);
    ::close(fd);
  }
  auto usage = directory_usage(dir_);
  fs::remove_all(outside);
  EXPECT_LT(usage.bytes, kMiB);
}

TEST_F(ScratchQuota, WatchdogSpeaksOnlyOverTheQuota) {
  ScratchQuotaWatch watch(dir_, 2 * kMiB, /*tmpfs=*/false);
  EXPECT_EQ(watch.describe()["kind"], "watchdog");
  write_file(dir_ / "under", kMiB);
  EXPECT_FALSE(watch.check(::getpid()));
  write_file(dir_ / "over", 2 * kMiB);
  EXPECT_FALSE(watch.check(::getpid()));  // not due yet: at most one walk per interval
  std::this_thread::sleep_until(watch.due());
  auto verdict = watch.check(::getpid());
  ASSERT_TRUE(verdict);
  EXPECT_NE(verdict->find("over the 2097152-byte quota"), std::string::npos) << *verdict;
  EXPECT_NE(verdict->find("scratch directory"), std::string::npos) << *verdict;
}

bool write_text(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// A child mounts a 1 MiB tmpfs over the folder in its own mount namespace (through a user
// namespace), then fills it on request; the watch reads it through /proc/<child>/root.
TEST_F(ScratchQuota, TmpfsInAnotherNamespaceIsReadThroughProc) {
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char status = 'n';
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) {
      write_text("/proc/self/setgroups", "deny");
      write_text("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1");
      write_text("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
          ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=1m") == 0) {
        status = 'y';
      }
    }
    (void)!::write(ready[1], &status, 1);
    if (status != 'y') _exit(0);
    char c;
    (void)!::read(go[0], &c, 1);
    int fd = ::open((dir_ / "fill").c_str(), O_CREAT | O_WRONLY, 0600);
    std::string block(4096, 'x');
    while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {
    }
    (void)!::write(ready[1], "f", 1);
    ::pause();
    _exit(0);
  }
  char status = 0;
  ASSERT_EQ(::read(ready[0], &status, 1), 1);
  if (status != 'y') {
    ::waitpid(child, nullptr, 0);
    GTEST_SKIP() << "this machine refuses user namespaces or tmpfs mounts";
  }
  ScratchQuotaWatch watch(dir_, kMiB, /*tmpfs=*/true);
  EXPECT_FALSE(watch.check(child));  // mounted, empty
  auto seen =
      filesystem_usage(fs::path("/proc") / std::to_string(child) / "root" / dir_.relative_path());
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->total_bytes, kMiB);
  EXPECT_FALSE(fs::exists(dir_ / "fill"));
  (void)!::write(go[1], "g", 1);
  ASSERT_EQ(::read(ready[0], &status, 1), 1);
  std::this_thread::sleep_until(watch.due());
  auto verdict = watch.check(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(verdict);
  EXPECT_NE(verdict->find("filled its scratch directory's 1048576-byte quota"), std::string::npos)
      << *verdict;
  EXPECT_FALSE(fs::exists(dir_ / "fill"));  // only inside the child's namespace
}

}  // namespace
}  // namespace kbv::orchestrate
