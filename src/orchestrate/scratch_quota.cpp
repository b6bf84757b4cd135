#include "orchestrate/scratch_quota.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <algorithm>
#include <set>
#include <utility>

namespace kbv::orchestrate {
namespace fs = std::filesystem;

DirectoryUsage directory_usage(const fs::path& dir) {
  DirectoryUsage usage;
  struct stat root {};
  if (::lstat(dir.c_str(), &root) != 0 || !S_ISDIR(root.st_mode)) return usage;
  usage.bytes = static_cast<unsigned long long>(root.st_blocks) * 512;
  std::set<std::pair<dev_t, ino_t>> seen;  // hard links count once
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;  // removed meanwhile
    ++usage.entries;
    if (S_ISDIR(st.st_mode) && st.st_dev != root.st_dev) it.disable_recursion_pending();
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) && !seen.emplace(st.st_dev, st.st_ino).second) {
      continue;
    }
    usage.bytes += static_cast<unsigned long long>(st.st_blocks) * 512;
  }
  return usage;
}

std::optional<FilesystemUsage> filesystem_usage(const fs::path& path) {
  struct statfs st {};
  if (::statfs(path.c_str(), &st) != 0) return std::nullopt;
  const auto block = static_cast<unsigned long long>(st.f_bsize);
  return FilesystemUsage{(static_cast<unsigned long long>(st.f_blocks) - st.f_bfree) * block,
                         static_cast<unsigned long long>(st.f_blocks) * block};
}

std::string watchdog_exceeded_message(unsigned long long used, unsigned long long quota) {
  return fmt::format(
      "scratch quota exceeded: the candidate wrote {} bytes into its scratch directory, over "
      "the {}-byte quota; it was killed",
      used, quota);
}

std::string tmpfs_filled_message(unsigned long long quota) {
  return fmt::format(
      "scratch quota exceeded: the candidate filled its scratch directory's {}-byte quota "
      "(writes beyond it failed with ENOSPC); it was killed",
      quota);
}

ScratchQuotaWatch::ScratchQuotaWatch(fs::path dir, unsigned long long quota_bytes, bool tmpfs)
    : dir_(std::move(dir)), quota_(quota_bytes), tmpfs_(tmpfs), next_(Clock::now()) {}

std::optional<std::string> ScratchQuotaWatch::check(pid_t pid) {
  auto start = Clock::now();
  if (start < next_) return std::nullopt;
  std::optional<std::string> verdict;
  if (tmpfs_) {
    // The tmpfs exists only in the worker's mount namespace; its /proc root shows it.
    if (pid > 0) {
      auto seen = fs::path("/proc") / std::to_string(pid) / "root" / dir_.relative_path();
      if (auto fs_usage = filesystem_usage(seen)) {
        last_bytes_ = fs_usage->used_bytes;
        if (fs_usage->total_bytes > 0 && fs_usage->used_bytes >= fs_usage->total_bytes) {
          verdict = tmpfs_filled_message(quota_);
        }
      }
    }
  } else {
    last_bytes_ = directory_usage(dir_).bytes;
    if (last_bytes_ > quota_) verdict = watchdog_exceeded_message(last_bytes_, quota_);
  }
  // A huge tree makes the walk slow: never spend more than a tenth of the time walking.
  auto spent = Clock::now() - start;
  next_ = Clock::now() + std::max<Clock::duration>(kInterval, spent * 10);
  return verdict;
}

nlohmann::json ScratchQuotaWatch::describe() const {
  return {{"kind", tmpfs_ ? "tmpfs" : "watchdog"},
          {"path", dir_.string()},
          {"bytes", quota_},
          {"interval_ms", kInterval.count()}};
}

}  // namespace kbv::orchestrate
