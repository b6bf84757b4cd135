#include "eval/workspace.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "eval/eval_request.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr const char* kOwnerFile = ".kbv-owner";
constexpr const char* kKeep = "keep\n";
}  // namespace

FolderOwner::FolderOwner(const fs::path& folder, bool keep) {
  fd_ = ::open((folder / kOwnerFile).c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (fd_ >= 0) ::close(fd_);
    errno = error;
    fd_ = -1;
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("cannot lock {}", (folder / kOwnerFile).string()));
  }
  if (keep && ::write(fd_, kKeep, std::strlen(kKeep)) < 0) {
    // Without the mark a killed run's kept folder may be reclaimed; a finished one is kept anyway.
  }
}

FolderOwner::FolderOwner(FolderOwner&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FolderOwner& FolderOwner::operator=(FolderOwner&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FolderOwner::~FolderOwner() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

fs::path work_root(const fs::path& root) {
  return fs::absolute((root.empty() ? fs::temp_directory_path() : root) / "kbv-runs")
      .lexically_normal();
}

PrivateDir make_private_dir(const fs::path& root, const char* prefix,
                            std::initializer_list<const char*> subs, bool keep) {
  fs::path base = work_root(root);
  fs::create_directories(base);
  std::string pattern = (base / fmt::format("{}-XXXXXX", prefix)).string();
  if (!::mkdtemp(pattern.data())) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("cannot create a folder under {}", base.string()));
  }
  PrivateDir dir{fs::path(pattern), FolderOwner(fs::path(pattern), keep)};
  for (const char* sub : subs) fs::create_directories(dir.path / sub);
  return dir;
}

PrivateDir make_run_dir(const fs::path& root, bool keep) {
  return make_private_dir(root, "kbv-run", {}, keep);
}

namespace {

// The folder's owner file exists, is not locked by a live process, and does not ask to be kept.
bool abandoned(const fs::path& folder) {
  int fd = ::open((folder / kOwnerFile).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  char mark[8] = {};
  bool keep = ::read(fd, mark, sizeof mark - 1) > 0 && std::string(mark) == kKeep;
  ::close(fd);
  return free && !keep;
}

std::uintmax_t allocated_bytes(const fs::path& folder) {
  std::uintmax_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) bytes += it->file_size(ec);
  }
  return bytes;
}

void reclaim_in(const fs::path& parent, const std::string& prefix, Reclaimed& out) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    if (!abandoned(entry.path())) continue;
    const auto bytes = allocated_bytes(entry.path());
    std::error_code removed;
    fs::remove_all(entry.path(), removed);
    if (removed) continue;
    ++out.folders;
    out.bytes += bytes;
  }
}

}  // namespace

Reclaimed reclaim_abandoned_folders(const fs::path& root) {
  Reclaimed out;
  reclaim_in(work_root(root), "kbv-", out);
  reclaim_in(work_root(root).parent_path(), "kbv-build-", out);
  return out;
}

std::string random_secret() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    throw std::runtime_error("cannot read /dev/urandom for the secret seed");
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace kbv::eval
