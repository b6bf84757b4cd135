#include "orchestrate/sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kbv::orchestrate {
namespace fs = std::filesystem;
namespace {

bool write_file(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::string error_text() { return std::strerror(errno); }

// Enters new network and mount namespaces: directly when privileged, else through a user
// namespace that maps the caller's own ids (unprivileged containers allow this more often).
std::string enter_namespaces(bool& ok) {
  constexpr int kFlags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID;
  ok = ::unshare(kFlags) == 0;
  if (ok) return "privileged";
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER | kFlags) != 0) {
    return "refused: " + error_text();
  }
  write_file("/proc/self/setgroups", "deny");
  ok = write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") &&
       write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
  return ok ? "user_namespace" : "user_namespace_without_id_map";
}

bool set_limit(int resource, unsigned long long value) {
  rlimit limit{value, value};
  return ::setrlimit(resource, &limit) == 0;
}

int processes_of_this_user() {
  int count = 0;
  uid_t uid = ::getuid();
  DIR* proc = ::opendir("/proc");
  if (!proc) return -1;
  while (auto* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    struct stat st {};
    std::string path = std::string("/proc/") + entry->d_name;
    if (::stat(path.c_str(), &st) == 0 && st.st_uid == uid) ++count;
  }
  ::closedir(proc);
  return count;
}

bool bind_path(const std::string& source, const fs::path& target, bool read_only) {
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return false;
  }
  if (!read_only) return true;
  return ::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID,
                 nullptr) == 0;
}

bool has_quota(const SandboxOptions& options, const fs::path& p) {
  return options.quota_bytes > 0 && !options.quota_dir.empty() && p == options.quota_dir;
}

// The scratch folder as a tmpfs of the quota's size, so the kernel bounds the total bytes
// written there (ENOSPC), not only each file (RLIMIT_FSIZE). False: it stays as it was.
bool mount_scratch_tmpfs(const SandboxOptions& options, nlohmann::json& report) {
  // The tmpfs starts with the folder's own subfolders (its tmp/ and home/).
  std::vector<fs::path> subfolders;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options.quota_dir, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) subfolders.push_back(entry.path());
  }
  std::string data = "size=" + std::to_string(options.quota_bytes) + ",mode=700";
  if (::mount("tmpfs", options.quota_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) !=
      0) {
    report["scratch_quota"] = {{"kind", "unavailable"},
                               {"reason", "mounting a tmpfs failed: " + error_text()}};
    return false;
  }
  for (const auto& sub : subfolders) fs::create_directories(sub, ec);
  report["scratch_quota"] = {
      {"kind", "tmpfs"}, {"path", options.quota_dir.string()}, {"bytes", options.quota_bytes}};
  return true;
}

bool contains(const std::vector<fs::path>& paths, const fs::path& p) {
  for (const auto& q : paths) {
    if (q == p) return true;
  }
  return false;
}

// Replaces `root` with an empty tmpfs and binds back each path of `keep` (held open by fd
// across the mount, since the tmpfs hides its old location).
nlohmann::json privatize_root(const SandboxOptions& options, nlohmann::json& sandbox_report) {
  nlohmann::json report = {{"path", options.private_root.string()}};
  std::vector<std::pair<fs::path, int>> keep;
  for (const auto* list : {&options.exposed, &options.writable}) {
    for (const auto& p : *list) {
      auto rel = p.lexically_relative(options.private_root);
      if (rel.empty() || rel.native().starts_with("..")) continue;  // outside the root
      int fd = ::open(p.c_str(), O_PATH | O_CLOEXEC);
      if (fd >= 0) keep.emplace_back(p, fd);
    }
  }
  if (::mount("tmpfs", options.private_root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              "size=64m,mode=755") != 0) {
    report["done"] = false;
    report["error"] = error_text();
    return report;
  }
  bool all = true;
  for (auto& [path, fd] : keep) {
    struct stat st {};
    ::fstat(fd, &st);
    std::error_code ec;
    if (S_ISDIR(st.st_mode)) {
      fs::create_directories(path, ec);
      if (has_quota(options, path) && mount_scratch_tmpfs(options, sandbox_report)) {
        ::close(fd);
        continue;
      }
    } else {
      fs::create_directories(path.parent_path(), ec);
      ::close(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    }
    all &=
        bind_path("/proc/self/fd/" + std::to_string(fd), path, !contains(options.writable, path));
    ::close(fd);
  }
  report["done"] = all;
  return report;
}

// At most this many entries of /tmp are carried into the private /tmp (each is a mount and an
// open descriptor while it is made); a /tmp with more is left as it is, and the report says so.
constexpr size_t kMaxTmpEntries = 2000;

// Binds `options.private_tmp` over /tmp, then every entry /tmp held back over it, recursively
// (so the privatized work root and the writable binds inside come along) and read-only; symbolic
// links are made again as they were.
nlohmann::json privatize_tmp(const SandboxOptions& options) {
  nlohmann::json report = {{"path", options.private_tmp.string()}, {"done", false}};
  std::error_code ec;
  fs::create_directories(options.private_tmp, ec);
  int tmp_fd = ::open(options.private_tmp.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (tmp_fd < 0) {
    report["error"] = "cannot open the private /tmp folder: " + error_text();
    return report;
  }
  struct Entry {
    std::string name;
    int fd = -1;
    std::string link;  // a symbolic link's target
    bool dir = false;
  };
  std::vector<Entry> entries;
  for (const auto& e : fs::directory_iterator("/tmp", ec)) {
    Entry entry{e.path().filename().string()};
    if (e.is_symlink(ec)) {
      entry.link = fs::read_symlink(e.path(), ec).string();
    } else {
      entry.fd = ::open(e.path().c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (entry.fd < 0) continue;
      struct stat st {};
      ::fstat(entry.fd, &st);
      entry.dir = S_ISDIR(st.st_mode);
    }
    entries.push_back(std::move(entry));
    if (entries.size() > kMaxTmpEntries) break;
  }
  auto close_all = [&] {
    for (auto& e : entries) {
      if (e.fd >= 0) ::close(e.fd);
    }
    ::close(tmp_fd);
  };
  if (entries.size() > kMaxTmpEntries) {
    report["error"] = fmt::format("/tmp holds more than {} entries", kMaxTmpEntries);
    close_all();
    return report;
  }
  if (!bind_path("/proc/self/fd/" + std::to_string(tmp_fd), "/tmp", /*read_only=*/false)) {
    report["error"] = "binding the private /tmp failed: " + error_text();
    close_all();
    return report;
  }
  int carried = 0;
  for (auto& e : entries) {
    const fs::path target = fs::path("/tmp") / e.name;
    if (!e.link.empty()) {
      carried += ::symlink(e.link.c_str(), target.c_str()) == 0;
      continue;
    }
    if (e.dir) {
      fs::create_directories(target, ec);
    } else {
      ::close(::open(target.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    }
    carried += bind_path("/proc/self/fd/" + std::to_string(e.fd), target, /*read_only=*/true);
  }
  close_all();
  report["entries"] = entries.size();
  report["carried"] = carried;
  report["done"] = carried == static_cast<int>(entries.size());
  return report;
}

// Clears every capability (bounding, effective, permitted, inheritable): without
// CAP_SYS_ADMIN the candidate cannot unmount the tmpfs that hides the golden outputs.
bool drop_all_capabilities() {
  for (int cap = 0; cap <= 63; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  return ::syscall(SYS_capset, &header, data) == 0;
}

// Every other mount (a separate /tmp, /home, ...) read-only too, except the kernel's own file
// systems and the writable paths this sandbox bound on purpose.
int read_only_submounts(const SandboxOptions& options) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::vector<std::string> points;
  std::string line;
  while (std::getline(mountinfo, line)) {
    // "id parent major:minor root mount-point options ..."
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    points.push_back(point);
  }
  int count = 0;
  for (const auto& point : points) {
    fs::path p(point);
    if (point == "/" || point.starts_with("/proc") || point.starts_with("/sys") ||
        point.starts_with("/dev") || contains(options.writable, p)) {
      continue;
    }
    auto rel = p.lexically_relative(options.private_root);
    if (!options.private_root.empty() && !rel.empty() && !rel.native().starts_with("..")) {
      continue;  // set up explicitly by privatize_root
    }
    if (p == options.private_root) continue;
    if (point == "/tmp" && !options.private_tmp.empty()) continue;  // the worker's own /tmp
    if (::mount(nullptr, point.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0) {
      ++count;
    }
  }
  return count;
}

// In a new PID namespace the next child is its init: this process stays outside as a relay
// that waits for it and ends the same way (exit status or signal), so the orchestrator sees
// the candidate's own fate. Returns only in the child.
void become_namespace_init() {
  pid_t child = ::fork();
  if (child < 0) return;  // no PID namespace then: carry on in this process
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    return;
  }
  // The relay needs none of the descriptors it inherited (the worker's pipes, the descriptor
  // socket, the run directory's lock): closed, the orchestrator's death reaches the worker as
  // the end of its input even where no signal does.
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (long fd = 3, end = ::sysconf(_SC_OPEN_MAX); fd < end; ++fd) ::close(static_cast<int>(fd));
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::prctl(PR_SET_PDEATHSIG, 0);
    ::kill(::getpid(), WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

}  // namespace

void die_with_parent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(1);  // it died before the line above: no signal will come
}

std::string apply_sandbox_in_child(const SandboxOptions& options) {
  nlohmann::json report = {{"enabled", options.enabled}};
  // Never leave core files of a crashing candidate. (Its death with the orchestrator is the
  // child's first line, die_with_parent.)
  set_limit(RLIMIT_CORE, 0);
  if (!options.enabled) return report.dump();

  report["max_file_bytes"] = set_limit(RLIMIT_FSIZE, options.max_file_bytes);
  report["max_open_files"] = set_limit(RLIMIT_NOFILE, options.max_open_files);
  if (options.max_cpu_seconds) {
    report["max_cpu_seconds"] = set_limit(RLIMIT_CPU, options.max_cpu_seconds);
  }
  if (options.max_data_bytes) {
    report["max_data_bytes"] = set_limit(RLIMIT_DATA, options.max_data_bytes);
  }

  bool namespaces = false;
  report["namespaces"] = enter_namespaces(namespaces);
  report["network_isolated"] = namespaces && options.isolate_network;

  bool mounts = namespaces && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  nlohmann::json hidden = nlohmann::json::array();
  for (const auto& dir : options.hidden) {
    bool done =
        mounts && ::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") == 0;
    hidden.push_back({{"path", dir.string()}, {"hidden", done}});
  }
  report["hidden_paths"] = hidden;
  if (options.quota_bytes > 0 && !mounts) {
    report["scratch_quota"] = {
        {"kind", "unavailable"},
        {"reason", "no mount namespace (" + report["namespaces"].get<std::string>() + ")"}};
  }
  // The working directory is resolved again after the mounts below, so that it is the
  // folder as the candidate sees it (a tmpfs scratch), not the one they hide.
  std::error_code cwd_error;
  std::string cwd = fs::current_path(cwd_error).string();
  if (mounts && !options.private_root.empty()) {
    report["private_root"] = privatize_root(options, report);
  }
  if (mounts) {
    report["private_dev_shm"] =
        ::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=1g") == 0;
    // Writable paths outside the private root (the build-cache folder) get their own mounts,
    // so they stay writable when the root below turns read-only.
    for (const auto& p : options.writable) {
      auto rel = p.lexically_relative(options.private_root);
      if (options.private_root.empty() || rel.empty() || rel.native().starts_with("..")) {
        if (!has_quota(options, p) || !mount_scratch_tmpfs(options, report)) {
          bind_path(p.string(), p, false);
        }
      }
    }
    if (!options.private_tmp.empty()) report["private_tmp"] = privatize_tmp(options);
    if (options.read_only_root) {
      report["read_only_root"] =
          ::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
      report["read_only_submounts"] = read_only_submounts(options);
    }
    if (!cwd_error) (void)!::chdir(cwd.c_str());
    if (options.quota_bytes > 0 && !report.contains("scratch_quota")) {
      report["scratch_quota"] = {{"kind", "unavailable"},
                                 {"reason", "the scratch folder is not a writable path"}};
    }
  }
  if (namespaces) {
    become_namespace_init();
    // Its own /proc: the orchestrator and every other process are out of sight and reach.
    report["pid_namespace"] =
        ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0;
  }
  if (options.max_new_processes) {
    int existing = processes_of_this_user();
    if (existing >= 0) {
      report["max_processes"] = set_limit(
          RLIMIT_NPROC, static_cast<unsigned long long>(existing) + options.max_new_processes);
    }
  }
  // No new privileges through setuid binaries, and no capabilities to undo the above.
  report["no_new_privs"] = ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
  if (options.drop_capabilities) report["capabilities_dropped"] = drop_all_capabilities();
  return report.dump();
}

}  // namespace kbv::orchestrate
