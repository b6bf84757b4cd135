#include "native/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace kbv::native {
namespace {

template <class Fn>
void Resolve(void* library, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr) {
    throw std::runtime_error(std::string("kbv_native: CUDA driver entry point ") + name +
                             " unavailable");
  }
}

CudaDriver Load() {
  // RTLD_NOLOAD first: the runtime (torch's) has normally loaded the driver already, and that
  // copy is the one whose contexts the arenas must use.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) library = dlopen("libcuda.so.1", RTLD_NOW);
  if (library == nullptr) {
    const char* why = dlerror();
    throw std::runtime_error(std::string("kbv_native: cannot load the CUDA driver libcuda.so.1: ") +
                             (why != nullptr ? why : "unknown error"));
  }
  CudaDriver d{};
  Resolve(library, d.GetErrorString, "cuGetErrorString");
  Resolve(library, d.GetErrorName, "cuGetErrorName");
  Resolve(library, d.MemGetAllocationGranularity, "cuMemGetAllocationGranularity");
  Resolve(library, d.MemCreate, "cuMemCreate");
  Resolve(library, d.MemRelease, "cuMemRelease");
  Resolve(library, d.MemAddressReserve, "cuMemAddressReserve");
  Resolve(library, d.MemAddressFree, "cuMemAddressFree");
  Resolve(library, d.MemMap, "cuMemMap");
  Resolve(library, d.MemUnmap, "cuMemUnmap");
  Resolve(library, d.MemSetAccess, "cuMemSetAccess");
  Resolve(library, d.MemExportToShareableHandle, "cuMemExportToShareableHandle");
  Resolve(library, d.MemImportFromShareableHandle, "cuMemImportFromShareableHandle");
  return d;
}

}  // namespace

const CudaDriver& Driver() {
  // A failed load throws out of call_once, which then runs again at the next call: a machine
  // whose driver appears later (never, in practice) is not stuck with the first error.
  static std::once_flag once;
  static CudaDriver driver;
  std::call_once(once, [] { driver = Load(); });
  return driver;
}

void CheckDriver(CUresult status, const char* call) {
  if (status == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* description = nullptr;
  const CudaDriver& d = Driver();
  if (d.GetErrorName(status, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.GetErrorString(status, &description) != CUDA_SUCCESS) description = nullptr;
  throw std::runtime_error(std::string("kbv_native: ") + call + " failed: " +
                           (name != nullptr ? name : "CUresult " + std::to_string(status)) + ": " +
                           (description != nullptr ? description : "no description"));
}

}  // namespace kbv::native
