// The processes that hold memory on one GPU, from the driver (NVML's compute processes): pid and
// bytes, as the driver accounts them per process. libnvidia-ml.so.1 is loaded with dlopen (it
// comes with the driver; the engine needs neither nvml.h nor CUDA to build). The pids are those
// the driver reports: this process's own numbering where the driver and kbv share a PID
// namespace; eval/held_memory checks that kbv's own workers are among them before it trusts them.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace kbv::eval {

struct DeviceProcess {
  pid_t pid = 0;
  std::optional<double> used_bytes;  // nullopt: the driver does not say (NVML_VALUE_NOT_AVAILABLE)
};

// The compute processes on the GPU whose UUID is `uuid` ("GPU-..." or the bare form torch
// gives); nullopt with `why` set when NVML is not there or a query failed.
std::optional<std::vector<DeviceProcess>> processes_on_device(const std::string& uuid,
                                                              std::string& why);

}  // namespace kbv::eval
