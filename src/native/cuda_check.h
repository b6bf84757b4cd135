// Turning CUDA runtime errors into C++ exceptions that nanobind raises as Python RuntimeError.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace kbv::native {

// Throws std::runtime_error naming the call that failed and CUDA's own description, so a worker
// log says which step of a measurement broke (a sticky error from a candidate's kernel shows up
// at the first call after it, and the name tells the reader which one that was).
inline void CheckCuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string("kbv_native: ") + call + " failed: " +
                           cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

}  // namespace kbv::native

#define KBV_CUDA_CHECK(call) ::kbv::native::CheckCuda((call), #call)
