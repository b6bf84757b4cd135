#include "schedule/devices.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "eval/eval_request.hpp"
#include "orchestrate/worker_process.hpp"

namespace kbv::schedule {
namespace fs = std::filesystem;

int visible_cuda_devices() {
  int count = 0;
  std::error_code ec;
  while (fs::exists("/dev/nvidia" + std::to_string(count), ec)) ++count;
  return count;
}

std::string default_device() { return visible_cuda_devices() > 0 ? "cuda" : "cpu"; }

std::vector<std::string> parse_devices(const std::string& spec) {
  std::vector<std::string> devices;
  if (spec == "all") {
    for (int i = 0, n = visible_cuda_devices(); i < n; ++i) {
      devices.push_back("cuda:" + std::to_string(i));
    }
    if (devices.empty()) devices.push_back("cpu");
    return devices;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    auto end = spec.find(',', start);
    auto item = spec.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!(item == "cpu" || item == "cuda" || (item.starts_with("cuda:") && item.size() > 5))) {
      throw eval::UsageError("--devices takes all, cpu, or a list such as cuda:0,cuda:1; not '" +
                             item + "'");
    }
    devices.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return devices;
}

// More evaluations per GPU than this wait on each other's timing runs more than they gain: on
// the H200 (16 cores), 8 per GPU waited about 4 times as long for the gate as 4 per GPU and ran
// slower (docs/results/issue4-suite-bench-h200.md).
constexpr int kMaxDefaultWorkersPerGpu = 4;

int default_workers_per_device(const std::string& device, int cuda_devices, unsigned cores) {
  if (!device.starts_with("cuda")) return 1;
  int per = static_cast<int>(cores) / (2 * std::max(1, cuda_devices));
  return std::clamp(per, 2, kMaxDefaultWorkersPerGpu);
}

bool worth_a_health_check(const Result& result) {
  return result.verdict == Verdict::RuntimeError || result.verdict == Verdict::Timeout ||
         result.verdict == Verdict::HarnessError ||
         result.has_flag("harness_fault_beside_tampering");
}

bool device_healthy(const std::string& device) {
  std::string command = "timeout 60 " + orchestrate::locate_python() +
                        " -c 'import torch; x = torch.ones(1024, device=\"" + device +
                        "\"); torch.cuda.synchronize(); assert float(x.sum()) == 1024' "
                        ">/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

}  // namespace kbv::schedule
