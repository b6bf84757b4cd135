// MemoryTrace in a build that cannot trace: without CUDA the constructor throws; with CUDA but
// without CUPTI's headers every trace is unavailable and says why. Built instead of the CUPTI path
// (gpu_trace_session.cpp, gpu_trace_collector.cpp, cupti_loader.cpp) in those configurations.
#include <stdexcept>
#include <string>

#include "native/gpu_trace.h"

namespace kbv::native {

#if !KBV_NATIVE_CUDA

// ---- built without CUDA -----------------------------------------------------------------------

MemoryTrace::MemoryTrace(int device, bool /*record_activities*/) : device_(device) {
  throw std::runtime_error("kbv_native was built without CUDA: MemoryTrace is not available");
}
CuptiStatus InitializeCupti() {
  throw std::runtime_error("kbv_native was built without CUDA: CUPTI is not available");
}
MemoryTrace::~MemoryTrace() = default;
void MemoryTrace::Enter() {
  throw std::runtime_error("kbv_native was built without CUDA: MemoryTrace is not available");
}
void MemoryTrace::Exit() {}
bool MemoryTrace::valid() const { return false; }
std::string MemoryTrace::CuptiLibrary() { return {}; }

#elif !KBV_NATIVE_CUPTI

// ---- built with CUDA but without cupti.h --------------------------------------------------------

MemoryTrace::MemoryTrace(int device, bool record_activities)
    : device_(device), record_activities_(record_activities) {}
CuptiStatus InitializeCupti() {
  CuptiStatus status;
  status.error = "kbv_native was built without CUPTI (cupti.h was not found at build time)";
  return status;
}
MemoryTrace::~MemoryTrace() = default;
void MemoryTrace::Enter() {
  if (entered_) throw std::runtime_error("kbv_native: a MemoryTrace can be entered only once");
  entered_ = true;
  available_ = false;
  why_unavailable_ =
      "kbv_native was built without CUPTI (cupti.h was not found at build time); rebuild with the "
      "CUDA toolkit's CUPTI headers";
}
void MemoryTrace::Exit() {}
bool MemoryTrace::valid() const { return false; }
std::string MemoryTrace::CuptiLibrary() { return {}; }

#else
#error \
    "gpu_trace_without_cupti.cpp is for builds without CUPTI: build gpu_trace_session.cpp instead"
#endif

}  // namespace kbv::native
