#include "orchestrate/sandbox.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace kbv::orchestrate {
namespace {

bool write_file(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// Enters new network and mount namespaces: directly when privileged, else through a user
// namespace that maps the caller's own ids (unprivileged containers allow this more often).
std::string enter_namespaces(bool& ok) {
  ok = ::unshare(CLONE_NEWNET | CLONE_NEWNS) == 0;
  if (ok) return "privileged";
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0) {
    return std::string("refused: ") + std::strerror(errno);
  }
  write_file("/proc/self/setgroups", "deny");
  ok = write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") &&
       write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
  return ok ? "user_namespace" : "user_namespace_without_id_map";
}

}  // namespace

std::string apply_sandbox_in_child(const SandboxOptions& options) {
  nlohmann::json report = {{"enabled", options.enabled}};
  // Never leave core files of a crashing candidate, and die with the orchestrator.
  rlimit core{0, 0};
  ::setrlimit(RLIMIT_CORE, &core);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!options.enabled) return report.dump();

  rlimit fsize{options.max_file_bytes, options.max_file_bytes};
  report["max_file_bytes"] = ::setrlimit(RLIMIT_FSIZE, &fsize) == 0;
  rlimit files{options.max_open_files, options.max_open_files};
  report["max_open_files"] = ::setrlimit(RLIMIT_NOFILE, &files) == 0;

  bool namespaces = false;
  if (options.isolate_network || !options.hidden.empty()) {
    report["namespaces"] = enter_namespaces(namespaces);
  }
  report["network_isolated"] = namespaces && options.isolate_network;

  nlohmann::json hidden = nlohmann::json::array();
  if (namespaces && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
    for (const auto& dir : options.hidden) {
      bool done = ::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") == 0;
      hidden.push_back({{"path", dir.string()}, {"hidden", done}});
    }
  } else {
    for (const auto& dir : options.hidden) {
      hidden.push_back({{"path", dir.string()}, {"hidden", false}});
    }
  }
  report["hidden_paths"] = hidden;
  // No new privileges through setuid binaries the candidate might exec.
  report["no_new_privs"] = ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
  return report.dump();
}

}  // namespace kbv::orchestrate
