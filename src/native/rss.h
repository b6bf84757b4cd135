// Resident-set-size probes for the host side of memory accounting.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace kbv::native {

// The process's current resident set size in bytes, from /proc/self/statm.
std::int64_t RssBytes();

// Measures the process's peak resident set size over a block of work (a Python context manager).
//
// Two sources, because neither is reliable alone: the kernel's high-water mark (VmHWM) is exact
// but can be reset only through /proc/self/clear_refs, which some sandboxes refuse or ignore;
// sampling /proc/self/statm from a background thread works everywhere but can miss a spike
// shorter than its period. The peak is the larger of the two.
class PeakRss {
 public:
  // use_hwm=false skips the high-water mark and relies on sampling alone (what a sandbox without
  // clear_refs gets), so that path can be exercised anywhere.
  explicit PeakRss(bool use_hwm = true) : use_hwm_(use_hwm) {}
  PeakRss(const PeakRss&) = delete;
  PeakRss& operator=(const PeakRss&) = delete;
  ~PeakRss();

  // Starts a measurement: records the baseline, resets VmHWM when the kernel allows it and starts
  // the sampler. Throws when a measurement is already running.
  void Enter();
  // Stops the sampler and fixes the peak. Touches no Python object, so the caller may release the
  // GIL around it.
  void Exit();

  std::int64_t baseline_bytes() const { return baseline_bytes_; }
  // While the block runs, the peak seen so far; after it, the peak of the whole block.
  std::int64_t peak_bytes() const;
  // "vmhwm+sampling" when the high-water mark was reset and used, "sampling" otherwise.
  std::string method() const { return hwm_reset_ ? "vmhwm+sampling" : "sampling"; }

 private:
  void StopSampler();

  bool use_hwm_ = true;
  std::int64_t baseline_bytes_ = 0;
  std::int64_t final_peak_bytes_ = 0;
  bool hwm_reset_ = false;
  bool active_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> sampled_peak_bytes_{0};
  std::thread sampler_;
};

}  // namespace kbv::native
