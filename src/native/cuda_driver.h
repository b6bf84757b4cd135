// The CUDA driver API entry points the shared arenas need (virtual memory management), resolved
// at run time from the libcuda.so.1 the runtime has loaded: kbv_native is not linked against
// libcuda, so it builds on machines without a driver and imports on machines without a GPU.
#pragma once

#include <cuda.h>

namespace kbv::native {

struct CudaDriver {
  decltype(&::cuGetErrorString) GetErrorString;
  decltype(&::cuGetErrorName) GetErrorName;
  decltype(&::cuMemGetAllocationGranularity) MemGetAllocationGranularity;
  decltype(&::cuMemCreate) MemCreate;
  decltype(&::cuMemRelease) MemRelease;
  decltype(&::cuMemAddressReserve) MemAddressReserve;
  decltype(&::cuMemAddressFree) MemAddressFree;
  decltype(&::cuMemMap) MemMap;
  decltype(&::cuMemUnmap) MemUnmap;
  decltype(&::cuMemSetAccess) MemSetAccess;
  decltype(&::cuMemExportToShareableHandle) MemExportToShareableHandle;
  decltype(&::cuMemImportFromShareableHandle) MemImportFromShareableHandle;
};

// Loaded once (thread-safe); throws std::runtime_error "CUDA driver entry point X unavailable"
// or naming the library that could not be opened.
const CudaDriver& Driver();

// Throws std::runtime_error naming the call and the driver's description of `status`.
void CheckDriver(CUresult status, const char* call);

}  // namespace kbv::native

#define KBV_CU_CHECK(call) ::kbv::native::CheckDriver((call), #call)
