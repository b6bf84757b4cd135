#include "native/cupti_loader.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdlib>
#include <vector>

namespace kbv::native {
namespace {

// dlopen a libcupti: first the copy already in the process (torch links libcupti.so.13, so after
// `import torch` it is loaded and two copies must not coexist), then $KBV_CUPTI_LIBRARY, then the
// one beside the CUDA runtime in use (pip wheels: site-packages/nvidia/cu13/lib), then the loader's
// search path, then the toolkit's usual places.
void* OpenCupti(std::string& tried) {
  static const char* const kNames[] = {"libcupti.so.13", "libcupti.so"};
  for (const char* name : kNames) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) return handle;
  }
  std::vector<std::string> candidates;
  if (const char* explicit_path = std::getenv("KBV_CUPTI_LIBRARY");
      explicit_path && *explicit_path) {
    candidates.emplace_back(explicit_path);
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) != 0 && info.dli_fname) {
    const std::string runtime = info.dli_fname;
    const auto slash = runtime.find_last_of('/');
    if (slash != std::string::npos) {
      const std::string dir = runtime.substr(0, slash);
      candidates.push_back(dir + "/libcupti.so.13");
      candidates.push_back(dir + "/../../cuda_cupti/lib/libcupti.so.13");
    }
  }
  candidates.emplace_back("libcupti.so.13");
  candidates.emplace_back("libcupti.so");
  candidates.emplace_back("/usr/local/cuda/lib64/libcupti.so.13");
  candidates.emplace_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  candidates.emplace_back("/usr/local/cuda/lib64/libcupti.so");
  candidates.emplace_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
  for (const std::string& candidate : candidates) {
    dlerror();
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = dlerror();
    if (!tried.empty()) tried += "; ";
    tried += error != nullptr ? error : candidate;
  }
  return nullptr;
}

template <typename F>
bool Resolve(void* library, const char* name, F& out, std::string& missing) {
  dlerror();
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    if (!missing.empty()) missing += ", ";
    missing += name;
    return false;
  }
  out = reinterpret_cast<F>(symbol);
  return true;
}

}  // namespace

std::string CuptiResultText(const CuptiApi& api, CUptiResult status) {
  const char* text = nullptr;
  if (api.GetResultString != nullptr && api.GetResultString(status, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return std::string(text) + " (" + std::to_string(static_cast<int>(status)) + ")";
  }
  return "CUPTI error " + std::to_string(static_cast<int>(status));
}

std::string LoadCupti(CuptiApi& api) {
  std::string tried;
  api.library = OpenCupti(tried);
  if (api.library == nullptr) {
    return "libcupti could not be loaded (set KBV_CUPTI_LIBRARY to its path): " + tried;
  }

  std::string missing;
  Resolve(api.library, "cuptiGetVersion", api.GetVersion, missing);
  Resolve(api.library, "cuptiGetResultString", api.GetResultString, missing);
  Resolve(api.library, "cuptiGetTimestamp", api.GetTimestamp, missing);
  Resolve(api.library, "cuptiActivityRegisterCallbacks", api.RegisterCallbacks, missing);
  Resolve(api.library, "cuptiActivityEnable", api.Enable, missing);
  Resolve(api.library, "cuptiActivityDisable", api.Disable, missing);
  Resolve(api.library, "cuptiActivityFlushAll", api.FlushAll, missing);
  Resolve(api.library, "cuptiActivityGetNextRecord", api.GetNextRecord, missing);
  Resolve(api.library, "cuptiActivityGetNumDroppedRecords", api.GetNumDroppedRecords, missing);
  Resolve(api.library, "cuptiSubscribe", api.Subscribe, missing);
  Resolve(api.library, "cuptiEnableCallback", api.EnableCallback, missing);
  std::string optional_missing;
  Resolve(api.library, "cuptiActivityEnableAllocationSource", api.EnableAllocationSource,
          optional_missing);
  Resolve(api.library, "cuptiSubscribe_v2", api.SubscribeV2, optional_missing);
  Resolve(api.library, "cuptiUnsubscribe", api.Unsubscribe, optional_missing);

  Dl_info info{};
  if (api.GetVersion != nullptr && dladdr(reinterpret_cast<void*>(api.GetVersion), &info) != 0 &&
      info.dli_fname) {
    api.path = info.dli_fname;
  }
  if (!missing.empty()) return "libcupti (" + api.path + ") lacks " + missing;

  const CUptiResult status = api.GetVersion(&api.version);
  if (status != CUPTI_SUCCESS) return "cuptiGetVersion failed: " + CuptiResultText(api, status);
  // The record layouts read here (CUpti_ActivityMemory4, CUpti_ActivityKernel10,
  // CUpti_ActivityMemoryPool3) are those of CUPTI 13 (API versions 130000 and up).
  if (api.version < 130000) {
    return "libcupti (" + api.path + ") has API version " + std::to_string(api.version) +
           ", older than CUDA 13's (130000); the record layouts would not match";
  }
  return {};
}

}  // namespace kbv::native
