// Device state a candidate can change behind the harness's back, read and put back between calls
// (threats T7, S1/S2 on the GPU): the persisting-L2 set-aside and a stream's access-policy
// window, and a raw fill of device memory (the candidate worker poisons the caching allocator's
// free blocks with it before each checked call).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kbv::native {

struct L2PersistingState {
  std::size_t limit_bytes = 0;      // cudaLimitPersistingL2CacheSize
  std::size_t max_limit_bytes = 0;  // cudaDevAttrMaxPersistingL2CacheSize (0: not supported)
  std::uintptr_t window_base = 0;   // the stream's accessPolicyWindow
  std::size_t window_bytes = 0;
  float window_hit_ratio = 0.0F;
  int window_hit_property = 0;  // cudaAccessProperty of hits (2 = persisting)
};

// On the stream's device.
L2PersistingState ReadL2Persisting(cudaStream_t stream);

// Limit back to 0, the stream's window cleared, persisting lines demoted to normal. Does nothing
// on a device without persisting L2.
void ResetL2Persisting(cudaStream_t stream);

// cudaMemsetAsync(ptr, value, bytes, stream).
void FillDevice(std::uintptr_t ptr, int value, std::size_t bytes, cudaStream_t stream);

}  // namespace kbv::native
