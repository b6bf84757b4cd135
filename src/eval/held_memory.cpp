#include "eval/held_memory.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kbv::eval {
namespace fs = std::filesystem;

namespace {

struct Status {
  pid_t parent = 0;
  double resident_bytes = 0;
};

// "PPid:", "RssAnon:" and "RssShmem:" of one status file (kB figures); nullopt when unreadable
// (the process ended while the folder was walked).
std::optional<Status> read_status(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  Status status;
  bool parent_seen = false;
  std::string key;
  while (in >> key) {
    if (key == "PPid:") {
      in >> status.parent;
      parent_seen = true;
    } else if (key == "RssAnon:" || key == "RssShmem:") {
      double kilobytes = 0;
      in >> kilobytes;
      status.resident_bytes += kilobytes * 1024.0;
    }
    std::string rest;
    std::getline(in, rest);
  }
  if (!parent_seen) return std::nullopt;
  return status;
}

}  // namespace

std::optional<double> resident_bytes_of_tree(pid_t root, const fs::path& proc) {
  std::map<pid_t, Status> processes;
  std::error_code error;
  for (fs::directory_iterator it(proc, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    if (auto status = read_status(it->path() / "status")) {
      processes[static_cast<pid_t>(std::stol(name))] = *status;
    }
  }
  if (!processes.count(root)) return std::nullopt;
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& [pid, status] : processes) children[status.parent].push_back(pid);
  double total = 0;
  std::set<pid_t> seen;
  std::vector<pid_t> pending{root};
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    if (!seen.insert(pid).second) continue;
    total += processes[pid].resident_bytes;
    for (pid_t child : children[pid]) pending.push_back(child);
  }
  return total;
}

std::optional<double> memory_returned_by(const std::function<std::optional<double>()>& free_now,
                                         const std::function<void()>& end, Settle settle) {
  const auto before = free_now();
  if (!before) return std::nullopt;
  end();
  const auto ended = std::chrono::steady_clock::now();
  const auto deadline = ended + settle.limit;
  auto last = free_now();
  if (!last) return std::nullopt;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(settle.interval);
    const auto now = free_now();
    if (!now) return std::nullopt;
    const bool agree = std::abs(*now - *last) <= settle.tolerance;
    last = now;
    if (agree && std::chrono::steady_clock::now() >= ended + settle.minimum) break;
  }
  return std::max(0.0, *last - *before);
}

std::optional<judge::HeldMemory> candidate_held_memory(orchestrate::WorkerProcess& candidate,
                                                       orchestrate::WorkerProcess* reference,
                                                       bool device, bool shares_device,
                                                       double planned_bytes) {
  judge::HeldMemory held;
  held.device = device;
  held.planned_bytes = planned_bytes;
  if (!device) {
    auto resident = resident_bytes_of_tree(candidate.pid());
    if (!resident) return std::nullopt;
    held.held_bytes = *resident;
    held.measured_by = "resident in its processes (RssAnon + RssShmem)";
    return held;
  }
  if (shares_device || reference == nullptr) return std::nullopt;
  auto free_now = [&]() -> std::optional<double> {
    try {
      auto answer = reference->call(orchestrate::worker_request(orchestrate::cmd::kPing),
                                    std::chrono::seconds(30));
      if (!answer.ok()) return std::nullopt;
      const auto& memory = answer.result.at("memory");
      if (memory.value("kind", "") != "device") return std::nullopt;
      return memory.at("free_bytes").get<double>();
    } catch (const std::exception&) {
      return std::nullopt;  // a reading kbv cannot take: nothing is blamed on the candidate
    }
  };
  auto returned = memory_returned_by(free_now, [&] { candidate.stop(); });
  if (!returned) return std::nullopt;
  held.held_bytes = *returned;
  held.measured_by = "free device memory that came back once its worker was ended";
  return held;
}

}  // namespace kbv::eval
