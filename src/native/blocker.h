// The blocking kernel: it holds a stream still while the host enqueues the timed work behind it,
// so the measured interval holds device time only, not the host's launch latency.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kbv::native {

// Shared between host and device through pinned, host-mapped memory. Epochs rather than a 0/1
// flag: a blocker waits for its own epoch, so a release meant for an earlier blocker (one that
// timed out, or one abandoned when the timed call raised) can never let a later one through
// early, and the host never has to reset the flag while a kernel might still be reading it.
struct BlockerFlags {
  // Written by the host: every blocker whose epoch is at most this value may finish.
  std::uint64_t release_epoch;
  // Written by the device when a blocker finishes: its epoch, so the host can tell that the
  // status below belongs to the blocker it launched.
  std::uint64_t finished_epoch;
  // Written by the device: 1 when the blocker gave up waiting (timeout), 0 when released.
  std::uint32_t timed_out;
};

// Makes sure the kernel's module is loaded. With lazy module loading (the default since CUDA
// 12.2) the first launch loads the module, and a load may wait for the whole context to go idle;
// loading it ahead of the first measurement keeps that wait away from a spinning blocker.
cudaError_t PrepareBlocker();

// Enqueues one blocker on `stream`. It spins until flags->release_epoch >= epoch or until
// timeout_ns passed on the device's global timer, then records how it ended in `flags`.
// `flags` is the device-side address of the mapped allocation.
cudaError_t LaunchBlocker(cudaStream_t stream, BlockerFlags* flags, std::uint64_t epoch,
                          std::uint64_t timeout_ns);

}  // namespace kbv::native
