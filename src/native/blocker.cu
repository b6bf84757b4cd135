#include "native/blocker.h"

namespace kbv::native {
namespace {

// %globaltimer is the device's nanosecond wall clock; unlike clock64 it does not depend on the SM
// clock, which changes with boost and throttling.
__device__ __forceinline__ std::uint64_t GlobalTimerNs() {
  std::uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__global__ void BlockUntilReleased(BlockerFlags* flags, std::uint64_t epoch,
                                   std::uint64_t timeout_ns) {
  // Volatile: every iteration must read host memory again instead of a value cached in a register
  // or in L1.
  volatile BlockerFlags* shared = flags;
  const std::uint64_t start = GlobalTimerNs();
  std::uint32_t timed_out = 0;
  while (shared->release_epoch < epoch) {
    if (GlobalTimerNs() - start >= timeout_ns) {
      timed_out = 1;
      break;
    }
    // Each poll is a PCIe read; a short sleep keeps the bus quiet without delaying the timed
    // work, whose start event is recorded only when this kernel ends anyway.
    __nanosleep(200);
  }
  shared->timed_out = timed_out;
  // The status must be visible to the host before the epoch that vouches for it.
  __threadfence_system();
  shared->finished_epoch = epoch;
}

}  // namespace

cudaError_t PrepareBlocker() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, BlockUntilReleased);
}

cudaError_t LaunchBlocker(cudaStream_t stream, BlockerFlags* flags, std::uint64_t epoch,
                          std::uint64_t timeout_ns) {
  // One thread is enough to hold the stream, and leaves the rest of the GPU to other streams.
  BlockUntilReleased<<<1, 1, 0, stream>>>(flags, epoch, timeout_ns);
  return cudaGetLastError();
}

}  // namespace kbv::native
