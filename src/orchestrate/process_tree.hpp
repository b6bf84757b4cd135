// A process and every process descended from it, by the parent links in /proc: what the
// orchestrator kills when it ends a worker (orchestrate/worker_process) and whose device memory it
// counts as the candidate's (eval/held_memory).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <set>

namespace kbv::orchestrate {

// Process `root` and its descendants, from the status files under `proc` (processes in a PID
// namespace of their own are listed there with this side's numbers). Empty when `root` is gone.
std::set<pid_t> process_tree(pid_t root, const std::filesystem::path& proc = "/proc");

}  // namespace kbv::orchestrate
