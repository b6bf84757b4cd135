// The facts of judge/held_memory.hpp, gathered when kbv's reference ran out of device memory
// while the candidate's worker was alive: the device memory the driver accounts to each of the
// candidate's processes (eval/device_processes.hpp), read from outside its sandbox at once,
// before anything of the candidate's is stopped. Per process, so what other evaluations, build
// workers or other programs on the GPU allocate or free meanwhile does not count.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "eval/device_processes.hpp"
#include "judge/held_memory.hpp"

namespace kbv::eval {

// What each side holds on the device in a listing: the candidate's processes (the rule's
// figure), the reference's, and every other process's (other evaluations, build workers, other
// programs; those the driver gives no figure for count 0): where an out-of-memory fault's memory
// was when the candidate's share does not explain it.
struct DeviceShares {
  double candidate_bytes = 0;
  double reference_bytes = 0;
  double others_bytes = 0;
};

// The shares in `listing`, or nullopt when the listing cannot be trusted for the candidate's: no
// process of `reference` (which has just allocated there, so it has a context) is in it, so the
// driver's pids are not this side's numbering; or the driver does not give a figure for a process
// of the candidate's.
std::optional<DeviceShares> shares_on_device(const std::vector<DeviceProcess>& listing,
                                             const std::set<pid_t>& candidate,
                                             const std::set<pid_t>& reference);

// Whether `fault` is one to weigh the candidate's memory for: the reference reported that its
// device allocation failed, in an evaluation on a GPU.
bool weighs_held_memory(const HarnessFault& fault, bool cuda);

// The driver's list of processes on a GPU (processes_on_device; a test gives its own).
using ListDeviceProcesses = std::function<std::optional<std::vector<DeviceProcess>>(
    const std::string& uuid, std::string& why)>;

// The facts for the rule: the candidate's worker `candidate_pid` (its sandbox's relay, whose
// descendants are the candidate's processes: orchestrate::process_tree) and the reference's
// `reference_pid` on the GPU `device_uuid`, with `planned_bytes` (the evaluation's memory plan).
// nullopt, with `why`, when they cannot be told here.
std::optional<judge::HeldMemory> candidate_held_memory(
    pid_t candidate_pid, pid_t reference_pid, const std::string& device_uuid, double planned_bytes,
    std::string& why, const ListDeviceProcesses& list = processes_on_device);

}  // namespace kbv::eval
