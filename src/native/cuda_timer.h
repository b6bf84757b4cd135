// Device-time measurement of a Python callable on a CUDA stream: cold L2, launch latency hidden
// behind a blocking kernel, CUDA events around each call.
#pragma once

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kbv::native {

struct CudaTimingOptions {
  int calls = 0;
  int warmup = 0;
  // The stream the timed work is enqueued on (torch's current stream); events, flush and blocker
  // all go there.
  cudaStream_t stream = nullptr;
  bool flush_l2 = true;
  bool block = true;
  double block_timeout_ms = 2000.0;
  // A blocker times out when the timed call waits for the device itself (a synchronisation, a
  // cudaFree, a full launch queue). It will do so on every call, each costing the full timeout,
  // so by default the measurement ends at the first one and the caller re-times unblocked.
  bool stop_on_block_timeout = true;
};

struct CudaTimingResult {
  std::vector<double> samples_ms;
  // One entry a sample: the blocker gave up before it was released, so launch latency was not
  // hidden from this sample.
  std::vector<bool> sample_block_timeout;
  int block_timeouts = 0;
  // The measurement ended before `calls` samples because of a blocker timeout.
  bool stopped_early = false;
  std::int64_t l2_bytes = 0;
  std::int64_t flush_bytes = 0;
};

// Runs the warm-up calls, then times each call. fn is called with the GIL held; the GIL is released
// only while waiting for the device.
CudaTimingResult TimeCuda(const nanobind::callable& fn, const CudaTimingOptions& options);

// cudaMemGetInfo on the current device: (free bytes, total bytes).
std::pair<std::size_t, std::size_t> CudaMemGetInfo();

// Frees the L2 flush buffers and the blocker's pinned flags; the next TimeCuda allocates them
// again.
void ReleaseScratch();

}  // namespace kbv::native
