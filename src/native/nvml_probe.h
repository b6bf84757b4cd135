// A snapshot of the GPU's clocks, temperature, power and clock-limiting reasons through NVML, read
// around measurements so a result can say whether the device throttled. libnvidia-ml.so.1 is
// loaded with dlopen (it comes with the driver, not the toolkit, and nvml.h is not needed to
// build).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kbv::native {

struct NvmlSample {
  std::string name;        // the GPU's name
  std::string pci_bus_id;  // as the CUDA runtime gives it for the device ordinal
  // "pci_bus_id" when NVML's device was found by the CUDA device's PCI bus id (right under
  // CUDA_VISIBLE_DEVICES), "index" when that failed and NVML's own index was used.
  std::string matched_by;
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> sm_clock_max_mhz;
  std::optional<unsigned> mem_clock_mhz;
  std::optional<unsigned> temperature_c;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  std::optional<std::uint64_t> throttle_reasons;   // NVML's clocks-event-reasons bitmask
  std::vector<std::string> throttle_reason_names;  // decoded bits, e.g. "sw_power_cap"
  std::vector<std::string> errors;  // a query that failed or is not supported: "what: why"
};

// Reads one sample for CUDA device ordinal `device`. Throws std::runtime_error when NVML is not
// there (no libnvidia-ml.so.1, nvmlInit fails) or in a build without CUDA. A single query that
// fails leaves its field empty and adds a line to `errors`.
NvmlSample SampleNvml(int device);

// The two figures read around every timed sample: SM clock and the clocks-event-reasons mask, -1
// where the query failed. The NVML handle of each device is looked up once and cached. Throws
// like SampleNvml when NVML is not there.
struct NvmlClocks {
  std::int64_t sm_clock_mhz = -1;
  std::int64_t reasons = -1;
};
NvmlClocks ReadNvmlClocks(int device);

// The names of the bits set in a clocks-event-reasons mask ("gpu_idle", "applications_clocks",
// "sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal", "hw_power_brake",
// "display_clocks", and "bit_<n>" for a bit this module does not know). Pure; exposed for tests.
std::vector<std::string> DecodeThrottleReasons(std::uint64_t mask);

}  // namespace kbv::native
