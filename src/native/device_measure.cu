#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "check/elementwise.hpp"
#include "native/checksum.h"
#include "native/cuda_check.h"
#include "native/device_measure.h"

namespace kbv::native {
namespace {

using check::PassPartial;
using check::PassSpec;
using check::RmsPartial;
using tensor::DType;

constexpr int kThreads = 256;

// Enough blocks to fill the device a few times over; each thread then walks the tensor with a
// grid stride, so the partials stay few (one per block) whatever the tensor's size.
int GridFor(std::int64_t work_items) {
  int device = 0, sms = 0;
  KBV_CUDA_CHECK(cudaGetDevice(&device));
  KBV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = (work_items + kThreads - 1) / kThreads;
  const std::int64_t most = static_cast<std::int64_t>(sms) * 8;
  return static_cast<int>(wanted < 1 ? 1 : wanted < most ? wanted : most);
}

// A pointer the kernels may read: device memory of the current device (a host pointer would
// fault the kernel and poison the context for the rest of the process), aligned to its element.
void CheckOperand(const void* p, std::size_t alignment, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % alignment != 0) {
    throw std::invalid_argument(std::string("kbv_native: ") + what +
                                " is not aligned to its element size");
  }
  cudaPointerAttributes attributes{};
  KBV_CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
  int device = 0;
  KBV_CUDA_CHECK(cudaGetDevice(&device));
  const bool readable =
      attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if (!readable || attributes.device != device) {
    throw std::invalid_argument(std::string("kbv_native: ") + what +
                                " is not memory of CUDA device " + std::to_string(device));
  }
}

// A block's threads merge their partials pairwise in shared memory; thread 0 holds the result.
template <class Partial, class Merge>
__device__ Partial ReduceBlock(Partial mine, Partial* shared, Merge merge) {
  shared[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      shared[threadIdx.x] = merge(shared[threadIdx.x], shared[threadIdx.x + stride]);
    }
    __syncthreads();
  }
  return shared[0];
}

struct MergePass {
  __device__ PassPartial operator()(const PassPartial& a, const PassPartial& b) const {
    return check::merge(a, b);
  }
};

struct MergeRms {
  __device__ RmsPartial operator()(const RmsPartial& a, const RmsPartial& b) const {
    return check::merge_rms(a, b);
  }
};

__global__ void __launch_bounds__(kThreads)
    MeasureKernel(const void* x, DType x_dtype, const void* y, DType y_dtype, const void* s,
                  DType s_dtype, std::int64_t n, PassSpec spec, PassPartial* partials) {
  __shared__ PassPartial shared[kThreads];
  PassPartial mine = check::empty_partial();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double sensitivity = s != nullptr ? tensor::load_as_double(s, s_dtype, i) : 0.0;
    check::accumulate(mine, i, tensor::load_as_double(x, x_dtype, i),
                      tensor::load_as_double(y, y_dtype, i), sensitivity, spec);
  }
  const PassPartial block = ReduceBlock(mine, shared, MergePass{});
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

__global__ void __launch_bounds__(kThreads)
    FiniteRmsKernel(const void* t, DType dtype, std::int64_t n, double threshold,
                    RmsPartial* partials) {
  __shared__ RmsPartial shared[kThreads];
  RmsPartial mine = check::empty_rms();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    check::accumulate_rms(mine, tensor::load_as_double(t, dtype, i), threshold);
  }
  const RmsPartial block = ReduceBlock(mine, shared, MergeRms{});
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

// Sums the terms of the whole words (aligned: one 8-byte load each; else byte loads) and the
// tail. Addition mod 2^64 is exact and commutative, so one atomic per warp is enough.
__global__ void __launch_bounds__(kThreads)
    ChecksumKernel(const unsigned char* p, std::size_t nbytes, ChecksumKeys keys,
                   unsigned long long* sum) {
  const std::size_t words = nbytes / 8;
  const bool aligned = reinterpret_cast<std::uintptr_t>(p) % 8 == 0;
  std::uint64_t mine = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    const std::uint64_t word =
        aligned ? reinterpret_cast<const std::uint64_t*>(p)[i] : TailWord(p + 8 * i, 8);
    mine += ChecksumTerm(word, i, keys);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && nbytes % 8 != 0) {
    mine += ChecksumTerm(TailWord(p + 8 * words, nbytes % 8), words, keys);
  }
  for (int offset = 16; offset > 0; offset /= 2)
    mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, static_cast<unsigned long long>(mine));
}

// A small device buffer (one partial per block, never the tensor's size) from the stream-ordered
// pool, or from cudaMalloc where the device has no memory pools; freed at the end of the scope.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer(std::size_t count, cudaStream_t stream) : stream_(stream) {
    const std::size_t bytes = count * sizeof(T);
    const cudaError_t status = cudaMallocAsync(reinterpret_cast<void**>(&data_), bytes, stream);
    if (status != cudaErrorNotSupported) {
      CheckCuda(status, "cudaMallocAsync");
      return;
    }
    cudaGetLastError();  // clear it: the fallback below is the answer
    pooled_ = false;
    KBV_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes));
  }
  ~DeviceBuffer() {
    if (data_ == nullptr) return;
    if (pooled_) {
      cudaFreeAsync(data_, stream_);
    } else {
      cudaFree(data_);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
  cudaStream_t stream_;
  bool pooled_ = true;
};

// One block's partials per element, copied back and merged on the host in block order.
template <class Partial>
std::vector<Partial> CopyPartials(const DeviceBuffer<Partial>& partials, int blocks,
                                  cudaStream_t stream) {
  std::vector<Partial> host(static_cast<std::size_t>(blocks));
  KBV_CUDA_CHECK(cudaMemcpyAsync(host.data(), partials.get(), host.size() * sizeof(Partial),
                                 cudaMemcpyDeviceToHost, stream));
  KBV_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// Element i of a device tensor, by a copy of that one element.
double ValueAt(const void* base, DType dtype, std::int64_t i, cudaStream_t stream) {
  unsigned char bytes[8] = {};
  const std::size_t size = tensor::element_size(dtype);
  KBV_CUDA_CHECK(cudaMemcpyAsync(bytes, static_cast<const unsigned char*>(base) + i * size, size,
                                 cudaMemcpyDeviceToHost, stream));
  KBV_CUDA_CHECK(cudaStreamSynchronize(stream));
  return tensor::load_as_double(bytes, dtype, 0);
}

}  // namespace

check::Measurement MeasureDevice(const void* x, DType x_dtype, const void* y, DType y_dtype,
                                 std::int64_t numel, const PassSpec& spec, cudaStream_t stream,
                                 const void* s, DType s_dtype) {
  PassPartial total = check::empty_partial();
  if (numel > 0) {
    CheckOperand(x, tensor::element_size(x_dtype), "x");
    CheckOperand(y, tensor::element_size(y_dtype), "y");
    if (s != nullptr) CheckOperand(s, tensor::element_size(s_dtype), "the sensitivity");
    const int blocks = GridFor(numel);
    DeviceBuffer<PassPartial> partials(static_cast<std::size_t>(blocks), stream);
    MeasureKernel<<<blocks, kThreads, 0, stream>>>(x, x_dtype, y, y_dtype, s, s_dtype, numel, spec,
                                                   partials.get());
    KBV_CUDA_CHECK(cudaGetLastError());
    for (const PassPartial& p : CopyPartials(partials, blocks, stream)) {
      total = check::merge(total, p);
    }
  }
  check::Measurement m = check::finish_measurement(total, numel, spec);
  if (m.worst >= 0) {
    m.x_at_worst = ValueAt(x, x_dtype, m.worst, stream);
    m.y_at_worst = ValueAt(y, y_dtype, m.worst, stream);
    if (s != nullptr) m.s_at_worst = ValueAt(s, s_dtype, m.worst, stream);
  }
  if (m.first_nonfinite_mismatch >= 0) {
    m.x_at_first_nonfinite = ValueAt(x, x_dtype, m.first_nonfinite_mismatch, stream);
    m.y_at_first_nonfinite = ValueAt(y, y_dtype, m.first_nonfinite_mismatch, stream);
  }
  return m;
}

double FiniteRmsDevice(const void* t, DType dtype, std::int64_t numel, double threshold,
                       cudaStream_t stream) {
  if (numel <= 0) return 0;
  CheckOperand(t, tensor::element_size(dtype), "the tensor");
  const int blocks = GridFor(numel);
  DeviceBuffer<RmsPartial> partials(static_cast<std::size_t>(blocks), stream);
  FiniteRmsKernel<<<blocks, kThreads, 0, stream>>>(t, dtype, numel, threshold, partials.get());
  KBV_CUDA_CHECK(cudaGetLastError());
  RmsPartial total = check::empty_rms();
  for (const RmsPartial& p : CopyPartials(partials, blocks, stream)) {
    total = check::merge_rms(total, p);
  }
  return check::rms_of(total);
}

std::vector<std::uint64_t> ChecksumsDevice(const std::vector<ChecksumBuffer>& buffers, int device,
                                           std::uint64_t key, cudaStream_t stream) {
  DeviceGuard guard(device);
  const ChecksumKeys keys = DeriveChecksumKeys(key);
  std::vector<unsigned long long> sums(buffers.size(), 0);
  if (!buffers.empty()) {
    DeviceBuffer<unsigned long long> device_sums(buffers.size(), stream);
    KBV_CUDA_CHECK(
        cudaMemsetAsync(device_sums.get(), 0, sums.size() * sizeof(unsigned long long), stream));
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const auto& [p, nbytes] = buffers[i];
      if (nbytes == 0) continue;
      CheckOperand(p, 1, "the buffer");
      const int blocks = GridFor(static_cast<std::int64_t>(nbytes / 8 + 1));
      ChecksumKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(p), nbytes,
                                                      keys, device_sums.get() + i);
      KBV_CUDA_CHECK(cudaGetLastError());
    }
    KBV_CUDA_CHECK(cudaMemcpyAsync(sums.data(), device_sums.get(),
                                   sums.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                                   stream));
    KBV_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<std::uint64_t> out;
  out.reserve(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    out.push_back(FinishChecksum(sums[i], buffers[i].nbytes, keys));
  }
  return out;
}

DeviceGuard::DeviceGuard(int device) {
  KBV_CUDA_CHECK(cudaGetDevice(&previous_));
  if (device != previous_) KBV_CUDA_CHECK(cudaSetDevice(device));
  // The runtime creates the device's primary context lazily; the driver calls of the arenas
  // need it current.
  KBV_CUDA_CHECK(cudaFree(nullptr));
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
}

}  // namespace kbv::native
