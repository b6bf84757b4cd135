// The facts of judge/held_memory.hpp, gathered when kbv's reference ran out of memory while the
// candidate's worker was alive: on the host, the resident memory of the candidate's processes;
// on a device, the free memory that came back once its worker was ended (read by the reference
// worker, which nothing of the candidate's reaches). The device figure is device-wide, so it is
// only taken when nothing else of kbv's allocates there meanwhile (EvalPlacement::shares_device).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>

#include "judge/held_memory.hpp"
#include "orchestrate/worker_process.hpp"

namespace kbv::eval {

// The resident memory, anonymous and shared (RssAnon + RssShmem: its heap, and what it maps of
// memfd blocks and tmpfs), of process `root` and every process descended from it, from the
// status files under `proc` (children in a PID namespace of its own are listed there with this
// side's numbers). nullopt when `root` is gone or its status cannot be read.
std::optional<double> resident_bytes_of_tree(pid_t root,
                                             const std::filesystem::path& proc = "/proc");

struct Settle {
  std::chrono::milliseconds interval{100};
  std::chrono::milliseconds minimum{500};  // read for at least this long after end()
  std::chrono::milliseconds limit{5000};
  double tolerance = 16.0 * (1 << 20);  // two readings this close agree
};

// How much free memory came back once `end()` had run: `free_now()` read before it, then every
// `settle.interval` until, `settle.minimum` on, two readings in a row agree within the
// tolerance, or until `settle.limit` has passed (a process's device memory returns as the driver
// tears its context down, not at its exit). nullopt when a reading failed; never negative.
std::optional<double> memory_returned_by(const std::function<std::optional<double>()>& free_now,
                                         const std::function<void()>& end, Settle settle = {});

// What the candidate's worker held when kbv's memory ran out, with `planned_bytes` (the
// evaluation's memory plan) for the rule; nullopt when it cannot be told here. On the host: the
// resident memory of its processes, read as they are. On a device: the free memory the
// reference worker sees before and after the candidate's worker is stopped, only when nothing
// else of kbv's shares the device (`shares_device` false) and the reference answers.
std::optional<judge::HeldMemory> candidate_held_memory(orchestrate::WorkerProcess& candidate,
                                                       orchestrate::WorkerProcess* reference,
                                                       bool device, bool shares_device,
                                                       double planned_bytes);

}  // namespace kbv::eval
