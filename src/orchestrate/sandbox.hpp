// Isolation applied to a worker process between fork and exec. Each layer is tried and the
// outcome recorded, because what a machine allows differs (containers refuse namespaces, gVisor
// refuses some mounts); the report says what was actually achieved, never what was intended.
//
// With namespaces available the candidate sees: no network; the whole file system read-only;
// the work root (where run directories live) replaced by an empty tmpfs into which only its own
// inputs, state, output and scratch folders are bound back; its own build-cache folder
// writable; a private /dev/shm; its scratch folder a tmpfs of the scratch quota's size; and no
// capabilities, so it cannot unmount any of this. Its /tmp is its own (private_tmp).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kbv::orchestrate {

struct SandboxOptions {
  bool enabled = true;
  bool isolate_network = true;                // a fresh network namespace: no interfaces
  std::vector<std::filesystem::path> hidden;  // directories replaced by an empty tmpfs
  // The work root to replace with an empty tmpfs, and the paths under it to bind back.
  std::filesystem::path private_root;
  std::vector<std::filesystem::path> exposed;   // bound back read-only...
  std::vector<std::filesystem::path> writable;  // ...or read-write (may be outside the root)
  bool read_only_root = true;
  bool drop_capabilities = true;
  unsigned long long max_file_bytes = 64ULL << 30;  // RLIMIT_FSIZE: no runaway output files
  unsigned long long max_open_files = 4096;
  unsigned long long max_cpu_seconds = 0;    // RLIMIT_CPU; 0: none
  unsigned long long max_data_bytes = 0;     // RLIMIT_DATA (heap and private maps); 0: none
  unsigned long long max_new_processes = 0;  // RLIMIT_NPROC above the user's current count; 0: none
  // The scratch folder (one of `writable`) and the most bytes it may hold in all: with mounts
  // it becomes a tmpfs of that size instead of a bind of the folder on disk; without, the
  // orchestrator's watchdog enforces it (scratch_quota.hpp). 0: no quota.
  std::filesystem::path quota_dir;
  unsigned long long quota_bytes = 0;
  // A folder (inside the scratch folder, so under its quota) that becomes the worker's own
  // writable /tmp: what /tmp held stays in sight read-only (the work root as privatized above),
  // and what the candidate writes there (`/tmp/cuda_extensions`, as KernelBench candidates do)
  // goes into this folder. Empty: /tmp stays as the rest of the file system (read-only).
  std::filesystem::path private_tmp;
};

// First thing in a child kbv forks (before exec): SIGKILL when the thread that forked it ends,
// and _exit(1) at once if `parent` (the forking process's pid, read before fork) is already
// gone. The signal is asked for after the fork, so an orchestrator killed in between (a kbv
// serve killed as it restarted its workers, session 35's CI) would leave the child, and the
// worker it goes on to start, running forever with the run directory locked.
void die_with_parent(pid_t parent);

// Runs in the forked child, after die_with_parent, before exec. The orchestrator forks only while
// single-threaded, so allocating here is safe. Applies what it can and returns a JSON report of
// what took effect.
std::string apply_sandbox_in_child(const SandboxOptions& options);

}  // namespace kbv::orchestrate
