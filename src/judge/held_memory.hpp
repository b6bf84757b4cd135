// Memory the candidate's processes held when kbv's reference ran out of memory: the rule that
// makes such a fault the candidate's verdict rather than kbv's (docs/threat-model.md, "Memory
// held on purpose"). A candidate whose process takes the device's free memory after its first
// forward makes the reference's next allocation (a case's draw, a deferred sensitivity's
// float64 runs) fail; as a harness fault that would leave a wrong candidate out of every figure,
// a reward hack. The facts are kbv's own: the device memory the driver accounts to the
// candidate's processes, read from outside its sandbox when the trusted reference reported that
// its device allocation failed. Pure; the facts are gathered by eval/held_memory.
#pragma once

#include <string>

namespace kbv::judge {

// Device memory only: on the host the candidate's heap has a cap on the CPU path, and a host
// that runs out has the kernel's OOM killer act, not an allocation fail.
struct HeldMemory {
  double held_bytes = 0;     // what the candidate's processes held
  double planned_bytes = 0;  // what the whole evaluation may hold at its peak (its memory plan)
  std::string measured_by;   // how held_bytes was read, in words
  // Read from the same listing, for the record (the rule weighs the candidate's only): what
  // kbv's reference held, and every other process on the device.
  double reference_bytes = 0;
  double others_bytes = 0;
};

// What an honest candidate's process holds on a GPU beside any plan: the CUDA context, the
// handles and workspaces of cuBLAS and cuDNN, the caching allocator's blocks (about 1 GB on the
// H200 with torch imported and a forward run).
inline constexpr double kDeviceHeldFloor = 4.0 * (1ULL << 30);

// The most the candidate may hold without being blamed: its evaluation's whole plan (reference
// and candidate together at their peak), and never less than the floor.
double held_allowance(const HeldMemory& held);

// The candidate's processes held more than the allowance: a fault of kbv's memory at that time
// is the candidate's doing.
bool held_beyond_plan(const HeldMemory& held);

// The candidate's runtime_error, in one sentence.
std::string held_memory_reason(const HeldMemory& held);

// The candidate's own call ran out of device memory (it is its runtime_error either way): the
// reason, with what its processes held where that was more than the allowance. A candidate that
// takes the device's free memory may meet its own next allocation before the reference's; which
// fails first is a race, and the reason says "held" either way.
std::string own_out_of_memory_reason(const std::string& reason, const HeldMemory& held);
// Whether a candidate's failure message reads as the device running out of memory (its text is
// the candidate's own: written to look so, it only adds figures to its own runtime_error).
bool reads_out_of_memory(const std::string& message);

// The figures in words, for a fault that stays kbv's (within the allowance).
std::string held_memory_note(const HeldMemory& held);

}  // namespace kbv::judge
