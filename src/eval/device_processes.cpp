#include "eval/device_processes.hpp"

#include <dlfcn.h>

#include <mutex>

namespace kbv::eval {
namespace {

// The few NVML types and entry points used, as nvml.h declares them (stable across releases).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr unsigned long long kValueNotAvailable = ~0ULL;
struct nvmlProcessInfo {  // nvmlProcessInfo_t, the layout nvmlDeviceGetComputeRunningProcesses_v3
  unsigned int pid;       // fills
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct Nvml {
  std::string error;  // non-empty: unusable in this process
  nvmlReturn_t (*Init)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*HandleByUuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*ComputeProcesses)(nvmlDevice_t, unsigned int*, nvmlProcessInfo*) = nullptr;
};

template <typename F>
void resolve(void* library, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(library, name));
}

std::string text_of(const Nvml& nvml, nvmlReturn_t status) {
  const char* text = nvml.ErrorString ? nvml.ErrorString(status) : nullptr;
  return std::string(text ? text : "NVML error") + " (" + std::to_string(status) + ")";
}

// Loaded and initialised once for the life of the process (nvmlInit is slow and counted).
const Nvml& nvml() {
  static Nvml* const loaded = [] {
    auto* n = new Nvml();
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char* error = dlerror();
      n->error = std::string("dlopen(libnvidia-ml.so.1) failed: ") + (error ? error : "?");
      return n;
    }
    resolve(library, "nvmlInit_v2", n->Init);
    resolve(library, "nvmlErrorString", n->ErrorString);
    resolve(library, "nvmlDeviceGetHandleByUUID", n->HandleByUuid);
    resolve(library, "nvmlDeviceGetComputeRunningProcesses_v3", n->ComputeProcesses);
    if (!n->Init || !n->HandleByUuid || !n->ComputeProcesses) {
      n->error =
          "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetHandleByUUID or "
          "nvmlDeviceGetComputeRunningProcesses_v3";
      return n;
    }
    if (nvmlReturn_t status = n->Init(); status != kSuccess) {
      n->error = "nvmlInit_v2: " + text_of(*n, status);
    }
    return n;
  }();
  return *loaded;
}

}  // namespace

std::optional<std::vector<DeviceProcess>> processes_on_device(const std::string& uuid,
                                                              std::string& why) {
  static std::mutex lock;  // NVML is thread-safe; the counts below are per call
  std::lock_guard guard(lock);
  const Nvml& n = nvml();
  if (!n.error.empty()) {
    why = "NVML is not available: " + n.error;
    return std::nullopt;
  }
  const std::string name = uuid.rfind("GPU-", 0) == 0 ? uuid : "GPU-" + uuid;
  nvmlDevice_t device = nullptr;
  if (nvmlReturn_t status = n.HandleByUuid(name.c_str(), &device); status != kSuccess) {
    why = "nvmlDeviceGetHandleByUUID(" + name + "): " + text_of(n, status);
    return std::nullopt;
  }
  std::vector<nvmlProcessInfo> infos(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto count = static_cast<unsigned int>(infos.size());
    nvmlReturn_t status = n.ComputeProcesses(device, &count, infos.data());
    if (status == kInsufficientSize) {
      infos.resize(static_cast<size_t>(count) + 64);
      continue;
    }
    if (status != kSuccess) {
      why = "nvmlDeviceGetComputeRunningProcesses_v3: " + text_of(n, status);
      return std::nullopt;
    }
    std::vector<DeviceProcess> out;
    for (unsigned int i = 0; i < count; ++i) {
      DeviceProcess p;
      p.pid = static_cast<pid_t>(infos[i].pid);
      if (infos[i].usedGpuMemory != kValueNotAvailable) {
        p.used_bytes = static_cast<double>(infos[i].usedGpuMemory);
      }
      out.push_back(p);
    }
    return out;
  }
  why = "nvmlDeviceGetComputeRunningProcesses_v3: the process list kept growing";
  return std::nullopt;
}

}  // namespace kbv::eval
