#include "native/cuda_timer.h"

#include <atomic>
#include <cmath>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <stdexcept>

#include "native/blocker.h"
#include "native/cuda_check.h"
#include "native/gpu_state.h"
#include "native/integrity.h"
#include "native/stream_device.h"

namespace nb = nanobind;

namespace kbv::native {
namespace {

// Used when the device reports no L2 size; larger than any L2 shipped so far (KernelBench itself
// clears 256 MB).
constexpr std::size_t kFallbackFlushBytes = std::size_t{256} << 20;

// An hour: long enough for any sane timeout, small enough that the conversion to nanoseconds
// cannot overflow.
constexpr double kMaxBlockTimeoutMs = 3.6e6;

struct FlushBuffer {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// Lives for the life of the process: the buffers are reused by every measurement, and they are
// never freed from a static destructor because the CUDA runtime may be gone by then (the OS takes
// them back at exit).
struct NativeState {
  std::map<int, FlushBuffer> flush_buffers;  // by device
  std::set<int> blocker_loaded;              // devices whose context has the blocker's module
  BlockerFlags* host_flags = nullptr;        // pinned, mapped, portable across devices
  std::uint64_t last_epoch = 0;
  // Set while a measurement runs. The GIL is released during device waits, so another Python
  // thread (or fn itself) could otherwise re-enter and free or reuse the buffers mid-measurement.
  bool busy = false;
};

NativeState& State() {
  static NativeState* const state = new NativeState();
  return *state;
}

class BusyScope {
 public:
  explicit BusyScope(const char* what) {
    if (State().busy) {
      throw std::runtime_error(std::string("kbv_native: ") + what +
                               " while time_cuda is running (called from the timed callable or "
                               "from another thread)");
    }
    State().busy = true;
  }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;
  ~BusyScope() { State().busy = false; }
};

// Makes `device` current for the scope and restores the caller's device afterwards, so the
// worker's (and torch's) notion of the current device is left as it was.
class DeviceScope {
 public:
  explicit DeviceScope(int device) : device_(device) {
    KBV_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_) KBV_CUDA_CHECK(cudaSetDevice(device_));
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }

 private:
  int device_;
  int previous_ = 0;
};

class Event {
 public:
  Event() { KBV_CUDA_CHECK(cudaEventCreate(&event_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // Destroying an event whose record is still pending is allowed; its resources are freed when
  // it completes.
  ~Event() { cudaEventDestroy(event_); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

std::int64_t L2Bytes(int device) {
  int l2_bytes = 0;
  KBV_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  return l2_bytes;
}

// Allocated once per device and kept: a cudaMalloc per measurement would cost time and could
// synchronise the device.
const FlushBuffer& EnsureFlushBuffer(int device) {
  auto& buffers = State().flush_buffers;
  if (const auto it = buffers.find(device); it != buffers.end()) return it->second;
  const std::int64_t l2_bytes = L2Bytes(device);
  FlushBuffer buffer;
  // Twice the L2 so that no line the previous call left behind survives the sweep.
  buffer.bytes = l2_bytes > 0 ? 2 * static_cast<std::size_t>(l2_bytes) : kFallbackFlushBytes;
  KBV_CUDA_CHECK(cudaMalloc(&buffer.data, buffer.bytes));
  return buffers.emplace(device, buffer).first->second;
}

bool SupportsPersistingL2(int device) {
  int max_persisting_bytes = 0;
  KBV_CUDA_CHECK(
      cudaDeviceGetAttribute(&max_persisting_bytes, cudaDevAttrMaxPersistingL2CacheSize, device));
  return max_persisting_bytes > 0;
}

// Returns the device-side address of the blocker's flags, allocating them on first use.
BlockerFlags* EnsureBlocker(int device) {
  NativeState& state = State();
  if (state.host_flags == nullptr) {
    void* memory = nullptr;
    KBV_CUDA_CHECK(
        cudaHostAlloc(&memory, sizeof(BlockerFlags), cudaHostAllocMapped | cudaHostAllocPortable));
    // Every epoch handed out so far counts as released: no blocker may wait on fresh memory.
    state.host_flags = new (memory) BlockerFlags{state.last_epoch, state.last_epoch, 0};
  }
  if (!state.blocker_loaded.contains(device)) {
    KBV_CUDA_CHECK(PrepareBlocker());
    state.blocker_loaded.insert(device);
  }
  void* device_flags = nullptr;
  KBV_CUDA_CHECK(cudaHostGetDevicePointer(&device_flags, state.host_flags, 0));
  return static_cast<BlockerFlags*>(device_flags);
}

// One blocker in flight on the stream. The destructor releases it, so a timed call that raises
// does not leave the stream held until the timeout.
class ArmedBlocker {
 public:
  ArmedBlocker(BlockerFlags* device_flags, cudaStream_t stream, std::uint64_t timeout_ns)
      : host_flags_(State().host_flags), epoch_(++State().last_epoch) {
    KBV_CUDA_CHECK(LaunchBlocker(stream, device_flags, epoch_, timeout_ns));
    armed_ = true;
  }
  ArmedBlocker(const ArmedBlocker&) = delete;
  ArmedBlocker& operator=(const ArmedBlocker&) = delete;
  ~ArmedBlocker() { Release(); }

  void Release() {
    if (!armed_) return;
    // Release ordering: nothing the host wrote before may appear to the device after the flag.
    std::atomic_ref<std::uint64_t>(host_flags_->release_epoch)
        .store(epoch_, std::memory_order_release);
    armed_ = false;
  }

  // Valid once the stream has passed the blocker (after the end event completed).
  bool TimedOut() const {
    const std::uint64_t finished =
        std::atomic_ref<std::uint64_t>(host_flags_->finished_epoch).load(std::memory_order_acquire);
    if (finished != epoch_) {
      throw std::runtime_error(
          "kbv_native: the blocking kernel did not report its status (finished epoch " +
          std::to_string(finished) + ", expected " + std::to_string(epoch_) + ")");
    }
    return std::atomic_ref<std::uint32_t>(host_flags_->timed_out).load(std::memory_order_acquire) !=
           0;
  }

 private:
  BlockerFlags* host_flags_;
  std::uint64_t epoch_;
  bool armed_ = false;
};

// Device waits release the GIL: they touch no Python object, and other Python threads (the
// worker's watchdog) must keep running while a long call finishes.
void SynchronizeStream(cudaStream_t stream) {
  cudaError_t status;
  {
    nb::gil_scoped_release no_gil;
    status = cudaStreamSynchronize(stream);
  }
  CheckCuda(status, "cudaStreamSynchronize(stream)");
}

void SynchronizeEvent(cudaEvent_t event) {
  cudaError_t status;
  {
    nb::gil_scoped_release no_gil;
    status = cudaEventSynchronize(event);
  }
  CheckCuda(status, "cudaEventSynchronize(end)");
}

void ValidateOptions(const CudaTimingOptions& options) {
  if (options.calls < 0 || options.warmup < 0) {
    throw std::invalid_argument("time_cuda: calls and warmup must be non-negative");
  }
  if (options.block &&
      !(options.block_timeout_ms > 0.0 && options.block_timeout_ms <= kMaxBlockTimeoutMs)) {
    throw std::invalid_argument("time_cuda: block_timeout_ms must be in (0, 3.6e6]");
  }
}

// ---- the per-sample steps ---------------------------------------------------------------------

// Outside the timed region. Persisting lines first: an ordinary sweep cannot evict lines a
// previous call marked persisting (cudaAccessPropertyPersisting), so they are demoted to normal
// before the memset pushes everything out.
// The set-aside for persisting lines (cudaLimitPersistingL2CacheSize) goes back to 0 and the timed
// stream's access-policy window is cleared too (T7): otherwise a window set by the candidate
// would mark its weights persisting again on the next call, before the flush could matter.
void FlushL2(const FlushBuffer& buffer, bool reset_persisting, cudaStream_t stream, int index) {
  if (reset_persisting) ResetL2Persisting(stream);
  // The byte changes per call so no layer of the memory system can treat the sweep as a no-op.
  KBV_CUDA_CHECK(cudaMemsetAsync(buffer.data, index & 0xff, buffer.bytes, stream));
}

struct Sample {
  double ms = 0.0;
  bool block_timeout = false;
};

Sample TimeOneCall(const nb::callable& fn, int index, const CudaTimingOptions& options,
                   const FlushBuffer* flush, bool reset_persisting, BlockerFlags* blocker_flags,
                   const Event& start, const Event& end) {
  if (flush != nullptr) FlushL2(*flush, reset_persisting, options.stream, index);
  std::optional<ArmedBlocker> blocker;
  if (blocker_flags != nullptr) {
    blocker.emplace(blocker_flags, options.stream,
                    static_cast<std::uint64_t>(std::llround(options.block_timeout_ms * 1e6)));
  }
  // The event functions are called through kbv_native's GOT: checked (and put back) around the
  // call, so that a slot the forward redirected cannot record or read a forged time.
  IntegrityQuickCheck();
  KBV_CUDA_CHECK(cudaEventRecord(start.get(), options.stream));
  nb::object output = fn(index);
  IntegrityQuickCheck();
  KBV_CUDA_CHECK(cudaEventRecord(end.get(), options.stream));
  if (blocker) blocker->Release();
  SynchronizeEvent(end.get());
  // Dropped only now: freeing the outputs is not the call's cost, and a free that synchronises
  // the device (PyTorch's caching allocator disabled) must not happen inside the timed region.
  output.reset();
  float elapsed_ms = 0.0F;
  IntegrityQuickCheck();
  KBV_CUDA_CHECK(cudaEventElapsedTime(&elapsed_ms, start.get(), end.get()));
  return {elapsed_ms, blocker && blocker->TimedOut()};
}

}  // namespace

// ---- the measurement loop ---------------------------------------------------------------------

CudaTimingResult TimeCuda(const nb::callable& fn, const CudaTimingOptions& options) {
  ValidateOptions(options);
  BusyScope busy("time_cuda called");
  const int device = StreamDevice(options.stream);
  DeviceScope device_scope(device);

  CudaTimingResult result;
  result.l2_bytes = L2Bytes(device);
  const FlushBuffer* flush = options.flush_l2 ? &EnsureFlushBuffer(device) : nullptr;
  result.flush_bytes = flush != nullptr ? static_cast<std::int64_t>(flush->bytes) : 0;
  const bool reset_persisting = flush != nullptr && SupportsPersistingL2(device);
  BlockerFlags* blocker_flags = options.block ? EnsureBlocker(device) : nullptr;

  // Warm-up calls are plain calls, each followed by a synchronisation: first calls load modules,
  // create library handles and grow allocator pools, which synchronise the device and would make
  // a blocker time out.
  for (int i = 0; i < options.warmup; ++i) {
    nb::object output = fn(i);
    SynchronizeStream(options.stream);
  }

  const Event start;
  const Event end;
  result.samples_ms.reserve(static_cast<std::size_t>(options.calls));
  result.sample_block_timeout.reserve(static_cast<std::size_t>(options.calls));
  for (int k = 0; k < options.calls; ++k) {
    const Sample sample = TimeOneCall(fn, options.warmup + k, options, flush, reset_persisting,
                                      blocker_flags, start, end);
    result.samples_ms.push_back(sample.ms);
    result.sample_block_timeout.push_back(sample.block_timeout);
    if (sample.block_timeout) {
      ++result.block_timeouts;
      if (options.stop_on_block_timeout) {
        result.stopped_early = k + 1 < options.calls;
        break;
      }
    }
  }
  IntegrityNote();
  return result;
}

std::pair<std::size_t, std::size_t> CudaMemGetInfo() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  KBV_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

void ReleaseScratch() {
  BusyScope busy("release_scratch called");
  NativeState& state = State();
  // Erased one by one so that a failure leaves the state describing what is still allocated.
  while (!state.flush_buffers.empty()) {
    const auto it = state.flush_buffers.begin();
    DeviceScope device_scope(it->first);
    KBV_CUDA_CHECK(cudaFree(it->second.data));
    state.flush_buffers.erase(it);
  }
  if (state.host_flags != nullptr) {
    KBV_CUDA_CHECK(cudaFreeHost(state.host_flags));
    state.host_flags = nullptr;
  }
}

}  // namespace kbv::native
