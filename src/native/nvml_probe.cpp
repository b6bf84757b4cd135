#include "native/nvml_probe.h"

#include <map>
#include <mutex>
#include <stdexcept>

#if KBV_NATIVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace kbv::native {

std::vector<std::string> DecodeThrottleReasons(std::uint64_t mask) {
  // nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*) from nvml.h.
  static const struct {
    std::uint64_t bit;
    const char* name;
  } kReasons[] = {
      {0x1, "gpu_idle"},    {0x2, "applications_clocks"}, {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"}, {0x10, "sync_boost"},         {0x20, "sw_thermal"},
      {0x40, "hw_thermal"}, {0x80, "hw_power_brake"},     {0x100, "display_clocks"},
  };
  std::vector<std::string> names;
  std::uint64_t known = 0;
  for (const auto& reason : kReasons) {
    known |= reason.bit;
    if (mask & reason.bit) names.emplace_back(reason.name);
  }
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t value = std::uint64_t{1} << bit;
    if ((mask & value) && !(known & value)) names.push_back("bit_" + std::to_string(bit));
  }
  return names;
}

#if !KBV_NATIVE_CUDA

NvmlSample SampleNvml(int /*device*/) {
  throw std::runtime_error("kbv_native was built without CUDA: nvml_sample is not available");
}

NvmlClocks ReadNvmlClocks(int /*device*/) {
  throw std::runtime_error("kbv_native was built without CUDA: nvml_clocks is not available");
}

#else

namespace {

// The few NVML types and entry points used, declared here so that nvml.h is not needed to build.
// Values from nvml.h (stable across NVML releases).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
constexpr int NVML_TEMPERATURE_GPU = 0;
constexpr unsigned kNameLength = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct Nvml {
  void* library = nullptr;
  std::string error;  // non-empty: NVML unusable in this process
  nvmlReturn_t (*Init)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*HandleByPciBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*HandleByIndex)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*GetClockInfo)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*GetMaxClockInfo)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*GetTemperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*GetEnforcedPowerLimit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*GetEventReasons)(nvmlDevice_t, unsigned long long*) = nullptr;
};

template <typename F>
void Resolve(void* library, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(library, name));
}

std::string ErrorText(const Nvml& nvml, nvmlReturn_t status) {
  const char* text = nvml.ErrorString != nullptr ? nvml.ErrorString(status) : nullptr;
  return std::string(text != nullptr ? text : "NVML error") + " (" + std::to_string(status) + ")";
}

// Loaded and initialised once; NVML stays initialised for the life of the process (nvmlInit is
// reference-counted and slow, and nothing here needs it shut down).
const Nvml& GetNvml() {
  static Nvml* const nvml = [] {
    auto* n = new Nvml();
    dlerror();
    n->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (n->library == nullptr) {
      const char* error = dlerror();
      n->error = std::string("NVML is not available: dlopen(libnvidia-ml.so.1) failed: ") +
                 (error != nullptr ? error : "unknown error");
      return n;
    }
    Resolve(n->library, "nvmlInit_v2", n->Init);
    Resolve(n->library, "nvmlErrorString", n->ErrorString);
    Resolve(n->library, "nvmlDeviceGetHandleByPciBusId_v2", n->HandleByPciBusId);
    Resolve(n->library, "nvmlDeviceGetHandleByIndex_v2", n->HandleByIndex);
    Resolve(n->library, "nvmlDeviceGetName", n->GetName);
    Resolve(n->library, "nvmlDeviceGetClockInfo", n->GetClockInfo);
    Resolve(n->library, "nvmlDeviceGetMaxClockInfo", n->GetMaxClockInfo);
    Resolve(n->library, "nvmlDeviceGetTemperature", n->GetTemperature);
    Resolve(n->library, "nvmlDeviceGetPowerUsage", n->GetPowerUsage);
    Resolve(n->library, "nvmlDeviceGetEnforcedPowerLimit", n->GetEnforcedPowerLimit);
    // The current name first; the older one is kept by NVML for compatibility.
    Resolve(n->library, "nvmlDeviceGetCurrentClocksEventReasons", n->GetEventReasons);
    if (n->GetEventReasons == nullptr) {
      Resolve(n->library, "nvmlDeviceGetCurrentClocksThrottleReasons", n->GetEventReasons);
    }
    if (n->Init == nullptr || (n->HandleByPciBusId == nullptr && n->HandleByIndex == nullptr)) {
      n->error = "NVML is not available: libnvidia-ml.so.1 lacks nvmlInit_v2 or the device lookups";
      return n;
    }
    const nvmlReturn_t status = n->Init();
    if (status != NVML_SUCCESS)
      n->error = "NVML is not available: nvmlInit_v2: " + ErrorText(*n, status);
    return n;
  }();
  return *nvml;
}

}  // namespace

NvmlSample SampleNvml(int device) {
  const Nvml& nvml = GetNvml();
  if (!nvml.error.empty()) throw std::runtime_error("kbv_native: " + nvml.error);

  NvmlSample sample;
  nvmlDevice_t handle = nullptr;
  char bus_id[64] = {0};
  const cudaError_t cuda_status = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device);
  if (cuda_status == cudaSuccess) {
    sample.pci_bus_id = bus_id;
    if (nvml.HandleByPciBusId != nullptr) {
      const nvmlReturn_t status = nvml.HandleByPciBusId(bus_id, &handle);
      if (status == NVML_SUCCESS) {
        sample.matched_by = "pci_bus_id";
      } else {
        sample.errors.push_back("nvmlDeviceGetHandleByPciBusId_v2(" + sample.pci_bus_id +
                                "): " + ErrorText(nvml, status));
        handle = nullptr;
      }
    }
  } else {
    sample.errors.push_back(std::string("cudaDeviceGetPCIBusId: ") + cudaGetErrorName(cuda_status) +
                            ": " + cudaGetErrorString(cuda_status));
  }
  if (handle == nullptr) {
    if (nvml.HandleByIndex == nullptr || device < 0) {
      throw std::runtime_error("kbv_native: NVML has no device for CUDA device " +
                               std::to_string(device));
    }
    const nvmlReturn_t status = nvml.HandleByIndex(static_cast<unsigned>(device), &handle);
    if (status != NVML_SUCCESS) {
      throw std::runtime_error("kbv_native: NVML has no device for CUDA device " +
                               std::to_string(device) +
                               ": nvmlDeviceGetHandleByIndex_v2: " + ErrorText(nvml, status));
    }
    sample.matched_by = "index";
  }

  auto note = [&](const char* what, nvmlReturn_t status) {
    sample.errors.push_back(std::string(what) + ": " + ErrorText(nvml, status));
  };
  auto missing = [&](const char* what) {
    sample.errors.push_back(std::string(what) + ": not exported by this libnvidia-ml");
  };

  if (nvml.GetName != nullptr) {
    char name[kNameLength] = {0};
    const nvmlReturn_t status = nvml.GetName(handle, name, kNameLength);
    if (status == NVML_SUCCESS)
      sample.name = name;
    else
      note("nvmlDeviceGetName", status);
  }
  unsigned value = 0;
  if (nvml.GetClockInfo != nullptr) {
    nvmlReturn_t status = nvml.GetClockInfo(handle, NVML_CLOCK_SM, &value);
    if (status == NVML_SUCCESS)
      sample.sm_clock_mhz = value;
    else
      note("nvmlDeviceGetClockInfo(SM)", status);
    status = nvml.GetClockInfo(handle, NVML_CLOCK_MEM, &value);
    if (status == NVML_SUCCESS)
      sample.mem_clock_mhz = value;
    else
      note("nvmlDeviceGetClockInfo(MEM)", status);
  } else {
    missing("nvmlDeviceGetClockInfo");
  }
  if (nvml.GetMaxClockInfo != nullptr) {
    const nvmlReturn_t status = nvml.GetMaxClockInfo(handle, NVML_CLOCK_SM, &value);
    if (status == NVML_SUCCESS)
      sample.sm_clock_max_mhz = value;
    else
      note("nvmlDeviceGetMaxClockInfo(SM)", status);
  }
  if (nvml.GetTemperature != nullptr) {
    const nvmlReturn_t status = nvml.GetTemperature(handle, NVML_TEMPERATURE_GPU, &value);
    if (status == NVML_SUCCESS)
      sample.temperature_c = value;
    else
      note("nvmlDeviceGetTemperature", status);
  } else {
    missing("nvmlDeviceGetTemperature");
  }
  if (nvml.GetPowerUsage != nullptr) {
    const nvmlReturn_t status = nvml.GetPowerUsage(handle, &value);  // milliwatts
    if (status == NVML_SUCCESS)
      sample.power_w = value / 1000.0;
    else
      note("nvmlDeviceGetPowerUsage", status);
  } else {
    missing("nvmlDeviceGetPowerUsage");
  }
  if (nvml.GetEnforcedPowerLimit != nullptr) {
    const nvmlReturn_t status = nvml.GetEnforcedPowerLimit(handle, &value);  // milliwatts
    if (status == NVML_SUCCESS)
      sample.power_limit_w = value / 1000.0;
    else
      note("nvmlDeviceGetEnforcedPowerLimit", status);
  }
  if (nvml.GetEventReasons != nullptr) {
    unsigned long long reasons = 0;
    const nvmlReturn_t status = nvml.GetEventReasons(handle, &reasons);
    if (status == NVML_SUCCESS) {
      sample.throttle_reasons = reasons;
      sample.throttle_reason_names = DecodeThrottleReasons(reasons);
    } else {
      note("nvmlDeviceGetCurrentClocksEventReasons", status);
    }
  } else {
    missing("nvmlDeviceGetCurrentClocksEventReasons");
  }
  return sample;
}

NvmlClocks ReadNvmlClocks(int device) {
  const Nvml& nvml = GetNvml();
  if (!nvml.error.empty()) throw std::runtime_error("kbv_native: " + nvml.error);
  static std::mutex mutex;
  static auto* const handles = new std::map<int, nvmlDevice_t>();
  nvmlDevice_t handle = nullptr;
  {
    std::lock_guard lock(mutex);
    if (auto it = handles->find(device); it != handles->end()) {
      handle = it->second;
    } else {
      char bus_id[64] = {0};
      if (nvml.HandleByPciBusId != nullptr &&
          cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device) == cudaSuccess &&
          nvml.HandleByPciBusId(bus_id, &handle) != NVML_SUCCESS) {
        handle = nullptr;
      }
      if (handle == nullptr && nvml.HandleByIndex != nullptr && device >= 0 &&
          nvml.HandleByIndex(static_cast<unsigned>(device), &handle) != NVML_SUCCESS) {
        handle = nullptr;
      }
      if (handle == nullptr) {
        throw std::runtime_error("kbv_native: NVML has no device for CUDA device " +
                                 std::to_string(device));
      }
      handles->emplace(device, handle);
    }
  }
  NvmlClocks clocks;
  unsigned value = 0;
  if (nvml.GetClockInfo != nullptr &&
      nvml.GetClockInfo(handle, NVML_CLOCK_SM, &value) == NVML_SUCCESS) {
    clocks.sm_clock_mhz = value;
  }
  unsigned long long reasons = 0;
  if (nvml.GetEventReasons != nullptr && nvml.GetEventReasons(handle, &reasons) == NVML_SUCCESS) {
    clocks.reasons = static_cast<std::int64_t>(reasons);
  }
  return clocks;
}

#endif

}  // namespace kbv::native
