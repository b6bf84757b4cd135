// The comparison pass and the checksum on a CUDA device: the same element rule as the host pass
// (check/elementwise.hpp), run where the tensors live, so a 17 GB output is never copied. Each
// call runs on `stream` and waits for it; the caller makes `device` current (DeviceGuard). No
// temporary grows with the tensor: the kernels reduce into one partial per block, which the host
// merges. Throws std::runtime_error naming the CUDA call that failed, std::invalid_argument for a
// misaligned pointer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "check/measure.hpp"
#include "native/checksum.h"
#include "tensor/dtype.hpp"

namespace kbv::native {

// x judged by y, `numel` elements each, both on the current device (their dtypes may differ:
// a float16 output against a float64 truth). `s`: y's per-element rounding sensitivity (numel
// elements on the same device; nullptr: none, s_i = 0). Values at the named elements are read
// back.
check::Measurement MeasureDevice(const void* x, tensor::DType x_dtype, const void* y,
                                 tensor::DType y_dtype, std::int64_t numel,
                                 const check::PassSpec& spec, cudaStream_t stream,
                                 const void* s = nullptr,
                                 tensor::DType s_dtype = tensor::DType::F32);

// RMS of the values that stay finite below `threshold`.
double FiniteRmsDevice(const void* t, tensor::DType dtype, std::int64_t numel, double threshold,
                       cudaStream_t stream);

// Checksums (native/checksum.h) of buffers on CUDA device `device`: a kernel each, then one wait
// for them all.
std::vector<std::uint64_t> ChecksumsDevice(const std::vector<ChecksumBuffer>& buffers, int device,
                                           std::uint64_t key, cudaStream_t stream);

// Makes `device` current (and its primary context, so driver calls work) for the scope, and
// restores the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace kbv::native
