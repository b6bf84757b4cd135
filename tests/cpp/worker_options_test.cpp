// The one builder of worker launch settings: the three kinds share the environment that makes
// measurements sound and the process limit, and differ only where their jobs differ.
#include "orchestrate/worker_options.hpp"

#include <gtest/gtest.h>

#include "orchestrate/worker_protocol.hpp"

namespace kbv::orchestrate {
namespace {

WorkerSpec spec_of(WorkerKind kind) {
  WorkerSpec spec;
  spec.kind = kind;
  spec.size = "small";
  spec.folder = "/tmp/kbv-runs/kbv-x";
  spec.candidate_file = "/work/cand.py";
  spec.extension_cache = "/cache/torch_extensions/abc-cpu";
  spec.scratch_quota_bytes = 1234;
  spec.max_host_memory_bytes = 5678;
  return spec;
}

TEST(WorkerOptions, EveryKindSharesTheMeasurementEnvironment) {
  for (auto kind : {WorkerKind::Reference, WorkerKind::Candidate, WorkerKind::Build}) {
    auto options = worker_options(spec_of(kind));
    for (const char* var : {"KBV_SIZE", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
                            "MALLOC_MMAP_THRESHOLD_", "OMP_WAIT_POLICY"}) {
      EXPECT_TRUE(options.environment.contains(var)) << var << " kind " << static_cast<int>(kind);
    }
    EXPECT_EQ(options.sandbox.max_new_processes, kMaxNewProcesses);
    EXPECT_FALSE(options.python.empty());
  }
}

TEST(WorkerOptions, CandidateSeesOnlyItsFolderAndWritesItsOutputsScratchAndCache) {
  auto options = worker_options(spec_of(WorkerKind::Candidate));
  EXPECT_EQ(options.role, WorkerRole::Candidate);
  EXPECT_EQ(options.sandbox.private_root, "/tmp/kbv-runs");
  EXPECT_EQ(options.working_directory, "/tmp/kbv-runs/kbv-x/scratch");
  EXPECT_EQ(options.environment.at("TMPDIR"), "/tmp/kbv-runs/kbv-x/scratch");
  EXPECT_EQ(options.environment.at("TRITON_CACHE_DIR"), "/tmp/kbv-runs/kbv-x/scratch");
  EXPECT_EQ(options.environment.at("TORCH_EXTENSIONS_DIR"), "/cache/torch_extensions/abc-cpu");
  EXPECT_EQ(options.environment.at("HOME"), "/tmp/kbv-runs/kbv-x/scratch/home");
  EXPECT_EQ(options.sandbox.private_tmp, "/tmp/kbv-runs/kbv-x/scratch/tmp");  // under the quota
  EXPECT_EQ(options.sandbox.quota_bytes, 1234u);
  EXPECT_EQ(options.sandbox.max_data_bytes, 5678u);  // CPU device: heap cap
  EXPECT_EQ(options.nice, 0);
  auto cuda = spec_of(WorkerKind::Candidate);
  cuda.cuda = true;
  EXPECT_EQ(worker_options(cuda).sandbox.max_data_bytes, 0u);  // CUDA maps large regions
}

TEST(WorkerOptions, ReferenceIsTrustedToWriteItsRunDirectory) {
  auto options = worker_options(spec_of(WorkerKind::Reference));
  EXPECT_EQ(options.role, WorkerRole::Reference);
  EXPECT_FALSE(options.sandbox.read_only_root);
  EXPECT_EQ(options.log_file, "/tmp/kbv-runs/kbv-x/reference.log");
  EXPECT_FALSE(options.environment.contains("TORCH_EXTENSIONS_DIR"));
  EXPECT_TRUE(options.sandbox.private_tmp.empty());  // its /tmp is writable as it is
}

TEST(WorkerOptions, NoWorkerGetsAnAllocatorSettingOfKbvs) {
  // Both roles run under the allocator torch gives them (and the user's setting, inherited):
  // the reference's timings and memory figures are measured as the candidate's are.
  for (auto kind : {WorkerKind::Reference, WorkerKind::Candidate, WorkerKind::Build}) {
    auto env = worker_options(spec_of(kind)).environment;
    EXPECT_FALSE(env.contains("PYTORCH_CUDA_ALLOC_CONF") || env.contains("PYTORCH_ALLOC_CONF"));
  }
}

TEST(WorkerOptions, BuildWorkerRunsNicerWithItsCachesInScratch) {
  auto options = worker_options(spec_of(WorkerKind::Build));
  EXPECT_EQ(options.role, WorkerRole::Candidate);  // it serves the candidate role's `import`
  EXPECT_EQ(options.nice, kBuildNice);
  EXPECT_EQ(options.environment.at("TRITON_CACHE_DIR"), "/tmp/kbv-runs/kbv-x");
  EXPECT_EQ(options.sandbox.quota_bytes, 1234u);
  EXPECT_EQ(options.sandbox.max_data_bytes, 0u);
  EXPECT_TRUE(options.sandbox.private_root.empty());  // no work root given: nothing to hide
  auto spec = spec_of(WorkerKind::Build);
  spec.work_root = "/tmp/kbv-runs";
  auto hidden = worker_options(spec);
  EXPECT_EQ(hidden.sandbox.private_root, "/tmp/kbv-runs");  // every run directory out of sight
  EXPECT_TRUE(hidden.sandbox.exposed.empty());
}

TEST(WorkerProtocol, RequestsAreBuiltOnlyForDeclaredCommands) {
  auto request = worker_request(cmd::kRunCase, {{"inputs", "x"}});
  EXPECT_EQ(request["cmd"], "run_case");
  EXPECT_EQ(request["inputs"], "x");
  EXPECT_THROW(worker_request("run_cases"), std::logic_error);
}

TEST(WorkerProtocol, EachRoleServesOnlyItsCommands) {
  EXPECT_NO_THROW(require_served(WorkerRole::Reference, worker_request(cmd::kLoadProblem)));
  EXPECT_THROW(require_served(WorkerRole::Candidate, worker_request(cmd::kLoadProblem)),
               std::logic_error);
  EXPECT_THROW(require_served(WorkerRole::Reference, worker_request(cmd::kRunCase)),
               std::logic_error);
  EXPECT_NO_THROW(require_served(WorkerRole::Candidate, worker_request(cmd::kExit)));
  EXPECT_THROW(require_served(WorkerRole::Candidate, nlohmann::json{{"cmd", "nope"}}),
               std::logic_error);
  EXPECT_THROW(require_served(WorkerRole::Candidate, nlohmann::json::array()), std::logic_error);
}

}  // namespace
}  // namespace kbv::orchestrate
