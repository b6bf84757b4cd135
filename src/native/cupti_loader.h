// The CUPTI entry points the GPU tracer uses, resolved from a libcupti loaded with dlopen (the copy
// the process already has when torch loaded one), and why CUPTI cannot be used when it cannot.
// Built only with CUDA and CUPTI's headers (KBV_NATIVE_CUPTI); no state of its own.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>

namespace kbv::native {

struct CuptiApi {
  void* library = nullptr;
  std::string path;           // the loaded libcupti ("" when none)
  std::uint32_t version = 0;  // cuptiGetVersion
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) RegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) Enable = nullptr;
  decltype(&cuptiActivityDisable) Disable = nullptr;
  decltype(&cuptiActivityFlushAll) FlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) GetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) GetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityEnableAllocationSource) EnableAllocationSource = nullptr;  // optional
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) SubscribeV2 = nullptr;  // optional
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;   // optional
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
};

// Loads libcupti into `api` and resolves its entry points: first the copy already in the process,
// then $KBV_CUPTI_LIBRARY, then the one beside the CUDA runtime in use, then the loader's search
// path and the toolkit's usual places. Returns "" or why CUPTI cannot be used (not found, an entry
// point missing, cuptiGetVersion failing, an API version older than CUDA 13's). `api` keeps what
// was resolved either way (path, version).
std::string LoadCupti(CuptiApi& api);

// CUPTI's text for `status` and its number; "CUPTI error <n>" when the library cannot say.
std::string CuptiResultText(const CuptiApi& api, CUptiResult status);

}  // namespace kbv::native
