#include "native/stream_device.h"

#include "native/cuda_check.h"

namespace kbv::native {

int StreamDevice(cudaStream_t stream) {
  int device = 0;
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    KBV_CUDA_CHECK(cudaGetDevice(&device));
  } else {
    KBV_CUDA_CHECK(cudaStreamGetDevice(stream, &device));
  }
  return device;
}

}  // namespace kbv::native
