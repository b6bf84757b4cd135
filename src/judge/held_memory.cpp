#include "judge/held_memory.hpp"

#include <fmt/format.h>

#include <algorithm>

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

std::string held_memory_note(const HeldMemory& held) {
  return fmt::format(
      "the candidate's processes held {:.2f} GB of device memory ({}), within the {:.2f} GB its "
      "evaluation may use",
      held.held_bytes / 1e9, held.measured_by, held_allowance(held) / 1e9);
}

}  // namespace kbv::judge
