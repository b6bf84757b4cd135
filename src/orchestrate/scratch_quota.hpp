// The total-bytes quota of a candidate's scratch folder. RLIMIT_FSIZE bounds each file; this
// bounds their sum, so many files each under that limit cannot fill the disk.
//
// Two ways, recorded in the isolation report as `scratch_quota`:
// - `tmpfs`: the sandbox (sandbox.cpp) mounts a tmpfs of the quota's size over the folder in
//   the candidate's mount namespace; the kernel refuses writes beyond it (ENOSPC). The
//   orchestrator reads its usage through /proc/<pid>/root (statfs) to end a candidate that
//   filled it with a clear reason instead of whatever it does with ENOSPC.
// - `watchdog`: without mounts (no user namespaces, --no-sandbox) the orchestrator sums the
//   folder's allocated bytes while it waits on the worker (every 200 ms, less often when the
//   walk itself is slow) and kills the worker's process group once the sum is over the quota.
//   A writer may overshoot by what it writes in one interval.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kbv::orchestrate {

struct DirectoryUsage {
  unsigned long long bytes = 0;  // allocated on disk (st_blocks), each inode once
  unsigned long long entries = 0;
};

// Walks `dir` without following symbolic links or leaving its file system. A missing folder is
// empty; entries that vanish during the walk are skipped.
DirectoryUsage directory_usage(const std::filesystem::path& dir);

struct FilesystemUsage {
  unsigned long long used_bytes = 0;
  unsigned long long total_bytes = 0;
};

// statfs of the file system holding `path` (a tmpfs of its own when the sandbox mounted one).
std::optional<FilesystemUsage> filesystem_usage(const std::filesystem::path& path);

// The verdict sentences, one per kind.
std::string watchdog_exceeded_message(unsigned long long used, unsigned long long quota);
std::string tmpfs_filled_message(unsigned long long quota);

// The orchestrator's side of the quota for one worker.
class ScratchQuotaWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kInterval{200};

  // `tmpfs`: the sandbox mounted one (read it through /proc/<pid>/root); else walk `dir`.
  ScratchQuotaWatch(std::filesystem::path dir, unsigned long long quota_bytes, bool tmpfs);

  // When the next check is due.
  Clock::time_point due() const { return next_; }
  // Checks when due (else returns nothing): the verdict sentence once the quota is exceeded
  // (watchdog) or filled (tmpfs). `pid`: a process inside the worker's mount namespace.
  std::optional<std::string> check(pid_t pid);
  // For the isolation report.
  nlohmann::json describe() const;

 private:
  std::filesystem::path dir_;
  unsigned long long quota_;
  bool tmpfs_;
  Clock::time_point next_;
  unsigned long long last_bytes_ = 0;
};

}  // namespace kbv::orchestrate
