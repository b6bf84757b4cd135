#include "native/rss.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace kbv::native {
namespace {

// Fast enough to catch a transient allocation that is touched page by page (a 200 MB buffer takes
// tens of milliseconds to fault in), cheap enough (one small procfs read) to run beside a
// measurement without disturbing it much.
constexpr auto kSamplePeriod = std::chrono::microseconds(200);

// After a reset, VmHWM should equal VmRSS; more than this above it means the reset was ignored.
constexpr std::int64_t kHwmResetSlackBytes = 4 << 20;

std::int64_t PageSize() {
  static const std::int64_t page_size = sysconf(_SC_PAGESIZE);
  return page_size;
}

// /proc/self/statm opened once and re-read with pread: the sampler reads it thousands of times a
// second, and procfs regenerates the contents on every read at offset 0.
class StatmReader {
 public:
  StatmReader() : fd_(open("/proc/self/statm", O_RDONLY | O_CLOEXEC)) {}
  StatmReader(const StatmReader&) = delete;
  StatmReader& operator=(const StatmReader&) = delete;
  ~StatmReader() {
    if (fd_ >= 0) close(fd_);
  }

  // Resident bytes, or nothing when the file cannot be read.
  std::optional<std::int64_t> Read() const {
    if (fd_ < 0) return std::nullopt;
    char buffer[256];
    const ssize_t n = pread(fd_, buffer, sizeof(buffer) - 1, 0);
    if (n <= 0) return std::nullopt;
    buffer[n] = '\0';
    // Fields: size resident shared text lib data dt, in pages.
    long long size_pages = 0;
    long long resident_pages = 0;
    if (std::sscanf(buffer, "%lld %lld", &size_pages, &resident_pages) != 2) return std::nullopt;
    return resident_pages * PageSize();
  }

 private:
  int fd_;
};

struct StatusRss {
  std::int64_t rss_bytes = -1;
  std::int64_t hwm_bytes = -1;
};

// VmRSS and VmHWM from one read of /proc/self/status, so the two describe the same instant.
StatusRss ReadStatus() {
  StatusRss result;
  std::FILE* file = std::fopen("/proc/self/status", "re");
  if (file == nullptr) return result;
  char line[256];
  while (std::fgets(line, sizeof(line), file) != nullptr) {
    const std::string_view view(line);
    long long kib = 0;
    if (view.starts_with("VmRSS:") && std::sscanf(line + 6, "%lld", &kib) == 1) {
      result.rss_bytes = kib * 1024;
    } else if (view.starts_with("VmHWM:") && std::sscanf(line + 6, "%lld", &kib) == 1) {
      result.hwm_bytes = kib * 1024;
    }
  }
  std::fclose(file);
  return result;
}

// Writing "5" to clear_refs resets the high-water mark to the current RSS (Linux 4.0+). Returns
// whether the reset verifiably happened: some sandboxes accept the write and do nothing.
bool ResetHighWaterMark() {
  const int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written = write(fd, "5", 1) == 1;
  close(fd);
  if (!written) return false;
  const StatusRss status = ReadStatus();
  return status.rss_bytes >= 0 && status.hwm_bytes >= 0 &&
         status.hwm_bytes <= status.rss_bytes + kHwmResetSlackBytes;
}

void RaiseMax(std::atomic<std::int64_t>& target, std::int64_t value) {
  std::int64_t current = target.load(std::memory_order_relaxed);
  while (value > current &&
         !target.compare_exchange_weak(current, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

std::int64_t RssBytes() {
  const std::optional<std::int64_t> rss = StatmReader().Read();
  if (!rss) {
    throw std::runtime_error(std::string("kbv_native: cannot read /proc/self/statm: ") +
                             std::strerror(errno));
  }
  return *rss;
}

PeakRss::~PeakRss() { StopSampler(); }

void PeakRss::Enter() {
  if (active_) throw std::runtime_error("PeakRss: the measurement is already running");
  // Reset first, then take the baseline: the high-water mark then starts at (or just below) the
  // baseline, never at an earlier peak of the process.
  hwm_reset_ = use_hwm_ && ResetHighWaterMark();
  baseline_bytes_ = RssBytes();
  final_peak_bytes_ = baseline_bytes_;
  sampled_peak_bytes_.store(baseline_bytes_, std::memory_order_relaxed);
  stop_.store(false, std::memory_order_relaxed);
  // The sampler touches no Python object, so it runs free of the GIL.
  sampler_ = std::thread([this] {
    const StatmReader statm;
    while (!stop_.load(std::memory_order_relaxed)) {
      if (const std::optional<std::int64_t> rss = statm.Read()) RaiseMax(sampled_peak_bytes_, *rss);
      std::this_thread::sleep_for(kSamplePeriod);
    }
  });
  active_ = true;
}

void PeakRss::Exit() {
  if (!active_) return;
  StopSampler();
  active_ = false;
  // One last sample: work that ended just before exit may have been resident since the sampler's
  // last read.
  if (const std::optional<std::int64_t> rss = StatmReader().Read()) {
    RaiseMax(sampled_peak_bytes_, *rss);
  }
  std::int64_t peak = std::max(baseline_bytes_, sampled_peak_bytes_.load());
  if (hwm_reset_) {
    const StatusRss status = ReadStatus();
    if (status.hwm_bytes >= 0) peak = std::max(peak, status.hwm_bytes);
  }
  final_peak_bytes_ = peak;
}

std::int64_t PeakRss::peak_bytes() const {
  if (!active_) return final_peak_bytes_;
  std::int64_t peak = std::max(baseline_bytes_, sampled_peak_bytes_.load());
  if (hwm_reset_) peak = std::max(peak, ReadStatus().hwm_bytes);
  return peak;
}

void PeakRss::StopSampler() {
  stop_.store(true, std::memory_order_relaxed);
  if (sampler_.joinable()) sampler_.join();
}

}  // namespace kbv::native
