// Isolation applied to a worker process between fork and exec. Each layer is tried and the
// outcome recorded, because what a machine allows differs (containers refuse namespaces, gVisor
// refuses some mounts); the report says what was actually achieved, never what was intended.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kbv::orchestrate {

struct SandboxOptions {
  bool enabled = true;
  bool isolate_network = true;                      // a fresh network namespace: no interfaces
  std::vector<std::filesystem::path> hidden;        // directories replaced by an empty tmpfs
  unsigned long long max_file_bytes = 64ULL << 30;  // RLIMIT_FSIZE: no runaway output files
  unsigned long long max_open_files = 4096;
};

// Runs in the forked child, before exec. The orchestrator forks only while single-threaded, so
// allocating here is safe. Applies what it can
// and returns a JSON report of what took effect.
std::string apply_sandbox_in_child(const SandboxOptions& options);

}  // namespace kbv::orchestrate
