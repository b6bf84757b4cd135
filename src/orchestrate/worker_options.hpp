// One builder for the launch settings of every worker kbv starts: the reference worker, the
// candidate's sandboxed worker, and `kbv run`'s build-ahead workers. What they share (the
// interpreter, the import path, the environment that makes measurements sound, the process
// limit) is written once here, so the three cannot drift apart.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "orchestrate/worker_process.hpp"

namespace kbv::orchestrate {

enum class WorkerKind {
  Reference,  // trusted problem code: writes its run's golden outputs; no network
  Candidate,  // the candidate under evaluation: sandboxed, sees only its own folder
  Build,      // imports a candidate ahead of evaluation to build its extensions
};

struct WorkerSpec {
  WorkerKind kind = WorkerKind::Candidate;
  std::string size;  // KBV_SIZE for the problem files of the bundled suite
  bool sandbox = true;
  // Reference: its run directory (working directory and log). Candidate: its own folder, with
  // inputs/, state/, candidate/ (outputs) and scratch/. Build: its scratch folder.
  std::filesystem::path folder;
  std::filesystem::path candidate_file;  // Candidate: bound read-only into its sandbox
  // Build: the folder of run directories and candidate folders (`<work>/kbv-runs`), hidden
  // whole from the build worker, which runs the candidate's import-time code.
  std::filesystem::path work_root;
  std::filesystem::path extension_cache;       // Candidate, Build: TORCH_EXTENSIONS_DIR (writable)
  unsigned long long scratch_quota_bytes = 0;  // Candidate, Build (orchestrate/scratch_quota)
  std::chrono::seconds compile_timeout{900};   // Candidate: part of its CPU-time limit
  unsigned long long max_host_memory_bytes = 0;  // Candidate on the CPU device: heap cap
  bool cuda = false;  // the device is a GPU (CUDA maps large private regions: no heap cap)
  unsigned long long address_space_bytes = 0;  // Reference: RLIMIT_AS (0: none; a test knob)
};

// Build workers' niceness: below the evaluations, so a timing run never waits for a core behind
// a compiler; the builds still take every core the evaluations leave idle.
inline constexpr int kBuildNice = 10;
// Processes a sandboxed worker may start beyond those its user already runs (compilers, ninja).
inline constexpr unsigned long long kMaxNewProcesses = 512;

// Pure: the folders it names (a candidate's or build's scratch/home and scratch/tmp among them)
// are made by the caller (make_scratch_folders).
WorkerOptions worker_options(const WorkerSpec& spec);

// The home/ and tmp/ folders of a scratch folder (the worker's HOME and /tmp).
void make_scratch_folders(const std::filesystem::path& scratch);

}  // namespace kbv::orchestrate
