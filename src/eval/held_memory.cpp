#include "eval/held_memory.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace kbv::eval {
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

std::optional<double> held_on_device(const std::vector<DeviceProcess>& listing,
                                     const std::set<pid_t>& candidate,
                                     const std::set<pid_t>& reference) {
  const bool numbering_shared = std::any_of(
      listing.begin(), listing.end(), [&](const auto& p) { return reference.count(p.pid) > 0; });
  if (!numbering_shared) return std::nullopt;
  double held = 0;
  for (const auto& p : listing) {
    if (!candidate.count(p.pid)) continue;
    if (!p.used_bytes) return std::nullopt;
    held += *p.used_bytes;
  }
  return held;
}

bool weighs_held_memory(const HarnessFault& fault, bool cuda) {
  return cuda && fault.kind == FaultKind::OutOfMemory && fault.memory == "device";
}

std::optional<judge::HeldMemory> candidate_held_memory(pid_t candidate_pid, pid_t reference_pid,
                                                       const std::string& device_uuid,
                                                       double planned_bytes, std::string& why,
                                                       const ListDeviceProcesses& list) {
  if (device_uuid.empty()) {
    why = "the reference did not name its GPU";
    return std::nullopt;
  }
  auto listing = list(device_uuid, why);
  if (!listing) return std::nullopt;
  const auto candidate = process_tree(candidate_pid);
  const auto reference = process_tree(reference_pid);
  auto held = held_on_device(*listing, candidate, reference);
  if (!held) {
    why =
        "the driver's process list does not show kbv's reference worker with this side's "
        "process numbers, or gives no figure for the candidate's";
    return std::nullopt;
  }
  return judge::HeldMemory{*held, planned_bytes,
                           "the driver's account of its processes (NVML), read when the "
                           "reference ran out"};
}

}  // namespace kbv::eval
