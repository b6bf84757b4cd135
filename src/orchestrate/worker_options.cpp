#include "orchestrate/worker_options.hpp"

namespace kbv::orchestrate {
namespace fs = std::filesystem;

namespace {

// Every worker's environment, on top of the orchestrator's own.
std::map<std::string, std::string> common_environment(const WorkerSpec& spec) {
  return {{"KBV_SIZE", spec.size},
          {"PYTHONUNBUFFERED", "1"},
          {"PYTHONDONTWRITEBYTECODE", "1"},
          // Large blocks come from and go back to the kernel, so the resident set tracks
          // live memory and CPU peaks are measurable.
          {"MALLOC_MMAP_THRESHOLD_", "65536"},
          // Idle OpenMP threads sleep instead of spinning: the worker that is not being timed
          // must not steal the cores of the one that is.
          {"OMP_WAIT_POLICY", "PASSIVE"}};
}

// Where hosted code's temporary files and caches go: its scratch folder, under its quota; its
// HOME (`~/.cache`, `~/.triton`) and its /tmp are folders of its own there too, so a candidate
// that builds into `/tmp/...` or `~/.cache/...`, as it may under KernelBench, works and writes
// nothing outside its sandbox.
void keep_files_in_scratch(WorkerOptions& options, const fs::path& scratch) {
  for (const char* var : {"TMPDIR", "XDG_CACHE_HOME", "TRITON_CACHE_DIR"}) {
    options.environment[var] = scratch.string();
  }
  options.environment["HOME"] = (scratch / "home").string();
  options.sandbox.private_tmp = scratch / "tmp";
}

}  // namespace

void make_scratch_folders(const fs::path& scratch) {
  fs::create_directories(scratch / "home");
  fs::create_directories(scratch / "tmp");
}

WorkerOptions worker_options(const WorkerSpec& spec) {
  WorkerOptions options;
  options.python = locate_python();
  options.pythonpath = locate_pythonpath();
  options.environment = common_environment(spec);
  options.sandbox.enabled = spec.sandbox;
  options.sandbox.max_new_processes = kMaxNewProcesses;
  const fs::path& dir = spec.folder;
  switch (spec.kind) {
    case WorkerKind::Reference:
      options.role = WorkerRole::Reference;
      options.working_directory = dir;
      options.log_file = dir / "reference.log";
      // The problem is user code too, but trusted: no network, no read-only file system.
      options.sandbox.read_only_root = false;
      options.address_space_bytes = spec.address_space_bytes;
      break;
    case WorkerKind::Candidate: {
      options.role = WorkerRole::Candidate;
      options.working_directory = dir / "scratch";
      options.log_file = dir / "candidate.log";
      options.environment["TORCH_EXTENSIONS_DIR"] = spec.extension_cache.string();
      keep_files_in_scratch(options, dir / "scratch");
      // The candidate sees its own file, never the reference's log or other runs; its inputs,
      // parameters and output slot come as shared blocks over its channel (docs/case-path.md).
      // It writes only its scratch and build cache.
      auto& box = options.sandbox;
      box.private_root = dir.parent_path();
      box.exposed = {spec.candidate_file};
      box.writable = {dir / "scratch", spec.extension_cache};
      box.max_cpu_seconds = 3600 + static_cast<unsigned long long>(spec.compile_timeout.count());
      box.quota_dir = dir / "scratch";
      box.quota_bytes = spec.scratch_quota_bytes;
      // Host memory cap on the CPU path (CUDA maps large private regions of its own).
      if (!spec.cuda) box.max_data_bytes = spec.max_host_memory_bytes;
      break;
    }
    case WorkerKind::Build:
      options.role = WorkerRole::Candidate;  // it serves the candidate role's `import`
      options.working_directory = dir;
      options.log_file = dir / "build.log";
      options.environment["TORCH_EXTENSIONS_DIR"] = spec.extension_cache.string();
      keep_files_in_scratch(options, dir);
      options.nice = kBuildNice;
      options.sandbox.writable = {dir, spec.extension_cache};
      // The candidate's import-time code runs here while other evaluations (its own problem's
      // reference among them) keep golden outputs in their run directories: all of them out of
      // sight, as in the candidate's own sandbox.
      options.sandbox.private_root = spec.work_root;
      options.sandbox.quota_dir = dir;
      options.sandbox.quota_bytes = spec.scratch_quota_bytes;
      break;
  }
  return options;
}

}  // namespace kbv::orchestrate
