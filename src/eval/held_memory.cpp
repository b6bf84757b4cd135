#include "eval/held_memory.hpp"

#include <algorithm>

#include "orchestrate/process_tree.hpp"

namespace kbv::eval {

std::optional<DeviceShares> shares_on_device(const std::vector<DeviceProcess>& listing,
                                             const std::set<pid_t>& candidate,
                                             const std::set<pid_t>& reference) {
  const bool numbering_shared = std::any_of(
      listing.begin(), listing.end(), [&](const auto& p) { return reference.count(p.pid) > 0; });
  if (!numbering_shared) return std::nullopt;
  DeviceShares shares;
  for (const auto& p : listing) {
    if (candidate.count(p.pid)) {
      if (!p.used_bytes) return std::nullopt;
      shares.candidate_bytes += *p.used_bytes;
    } else if (reference.count(p.pid)) {
      shares.reference_bytes += p.used_bytes.value_or(0);
    } else {
      shares.others_bytes += p.used_bytes.value_or(0);
    }
  }
  return shares;
}

bool weighs_held_memory(const HarnessFault& fault, bool cuda) {
  // A library plan the reference chose for want of room is weighed too: a candidate holding
  // more than its whole evaluation's plan would otherwise turn its own verdict into a harness
  // error by starving the reference's first calls.
  return cuda && fault.kind == FaultKind::OutOfMemory &&
         (fault.memory == "device" || fault.memory == "library_plan");
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
  const auto candidate = orchestrate::process_tree(candidate_pid);
  const auto reference = orchestrate::process_tree(reference_pid);
  auto shares = shares_on_device(*listing, candidate, reference);
  if (!shares) {
    why =
        "the driver's process list does not show kbv's reference worker with this side's "
        "process numbers, or gives no figure for the candidate's";
    return std::nullopt;
  }
  judge::HeldMemory held{shares->candidate_bytes, planned_bytes,
                         "the driver's account of its processes (NVML), read when the "
                         "reference ran out"};
  held.reference_bytes = shares->reference_bytes;
  held.others_bytes = shares->others_bytes;
  return held;
}

}  // namespace kbv::eval
