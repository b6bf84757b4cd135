// The device a CUDA stream belongs to, shared by the timing path (cuda_timer.cpp) and the device
// state probes (gpu_state.cpp). Built only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

namespace kbv::native {

// The worker passes torch's current stream, which need not be on the runtime's current device,
// and every call made for it must run on the stream's own device. The legacy and per-thread
// default streams (and nullptr) belong to the current device. Throws std::runtime_error when CUDA
// cannot say.
int StreamDevice(cudaStream_t stream);

}  // namespace kbv::native
