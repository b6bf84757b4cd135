#include "native/gpu_state.h"

#include "native/cuda_check.h"
#include "native/stream_device.h"

namespace kbv::native {
namespace {

// The stream attribute cannot be read or set on the legacy default stream handle (nullptr) on
// every driver; errors there are read as "no window".
bool ReadWindow(cudaStream_t stream, cudaAccessPolicyWindow& window) {
  cudaStreamAttrValue value = {};
  if (cudaStreamGetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &value) !=
      cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so later checks do not see it
    return false;
  }
  window = value.accessPolicyWindow;
  return true;
}

}  // namespace

L2PersistingState ReadL2Persisting(cudaStream_t stream) {
  L2PersistingState state;
  const int device = StreamDevice(stream);
  int max_bytes = 0;
  KBV_CUDA_CHECK(cudaDeviceGetAttribute(&max_bytes, cudaDevAttrMaxPersistingL2CacheSize, device));
  state.max_limit_bytes = static_cast<std::size_t>(max_bytes);
  if (max_bytes <= 0) return state;
  KBV_CUDA_CHECK(cudaDeviceGetLimit(&state.limit_bytes, cudaLimitPersistingL2CacheSize));
  cudaAccessPolicyWindow window = {};
  if (ReadWindow(stream, window)) {
    state.window_base = reinterpret_cast<std::uintptr_t>(window.base_ptr);
    state.window_bytes = window.num_bytes;
    state.window_hit_ratio = window.hitRatio;
    state.window_hit_property = static_cast<int>(window.hitProp);
  }
  return state;
}

void ResetL2Persisting(cudaStream_t stream) {
  const L2PersistingState state = ReadL2Persisting(stream);
  if (state.max_limit_bytes == 0) return;
  if (state.window_bytes != 0) {
    cudaStreamAttrValue value = {};
    value.accessPolicyWindow.num_bytes = 0;  // a zero-size window disables it
    value.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
    value.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
    KBV_CUDA_CHECK(cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &value));
  }
  if (state.limit_bytes != 0) {
    KBV_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  }
  KBV_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
}

void FillDevice(std::uintptr_t ptr, int value, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  KBV_CUDA_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(ptr), value, bytes, stream));
}

}  // namespace kbv::native
