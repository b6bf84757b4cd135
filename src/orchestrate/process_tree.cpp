#include "orchestrate/process_tree.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kbv::orchestrate {
namespace fs = std::filesystem;

namespace {

// The parent of one process from its status file ("PPid:"); nullopt when unreadable (the
// process ended while the folder was walked).
std::optional<pid_t> parent_of(const fs::path& status_file) {
  std::ifstream in(status_file);
  std::string key;
  while (in >> key) {
    if (key == "PPid:") {
      pid_t parent = 0;
      if (in >> parent) return parent;
      return std::nullopt;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return std::nullopt;
}

}  // namespace

std::set<pid_t> process_tree(pid_t root, const fs::path& proc) {
  std::map<pid_t, std::vector<pid_t>> children;
  bool root_seen = false;
  std::error_code error;
  for (fs::directory_iterator it(proc, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (auto parent = parent_of(it->path() / "status")) {
      children[*parent].push_back(pid);
      root_seen = root_seen || pid == root;
    }
  }
  std::set<pid_t> tree;
  if (!root_seen) return tree;
  std::vector<pid_t> pending{root};
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    if (!tree.insert(pid).second) continue;
    for (pid_t child : children[pid]) pending.push_back(child);
  }
  return tree;
}

}  // namespace kbv::orchestrate
