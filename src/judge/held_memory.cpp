#include "judge/held_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace kbv::judge {

double held_allowance(const HeldMemory& held) {
  return std::max(held.planned_bytes, kDeviceHeldFloor);
}

bool held_beyond_plan(const HeldMemory& held) { return held.held_bytes > held_allowance(held); }

std::string held_memory_reason(const HeldMemory& held) {
  return fmt::format(
      "kbv's reference ran out of device memory while the candidate's processes held {:.2f} GB "
      "of it ({}), more than the {:.2f} GB its whole evaluation may use at its peak",
      held.held_bytes / 1e9, held.measured_by, held_allowance(held) / 1e9);
}

std::string own_out_of_memory_reason(const std::string& reason, const HeldMemory& held) {
  if (!held_beyond_plan(held)) return reason;
  return fmt::format(
      "{}; the candidate's processes held {:.2f} GB of device memory ({}), more than the {:.2f} "
      "GB its whole evaluation may use at its peak",
      reason, held.held_bytes / 1e9, held.measured_by, held_allowance(held) / 1e9);
}

bool reads_out_of_memory(const std::string& message) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("out of memory") != std::string::npos ||
         lower.find("out_of_memory") != std::string::npos;
}

std::string held_memory_note(const HeldMemory& held) {
  return fmt::format(
      "the candidate's processes held {:.2f} GB of device memory ({}), within the {:.2f} GB its "
      "evaluation may use; the reference's {:.2f} GB, other processes {:.2f} GB",
      held.held_bytes / 1e9, held.measured_by, held_allowance(held) / 1e9,
      held.reference_bytes / 1e9, held.others_bytes / 1e9);
}

}  // namespace kbv::judge
