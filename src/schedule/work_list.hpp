// What a suite run has left to do: its tasks minus the ones its database holds (schedule/
// resume.hpp decides which stored results are evaluated again), each with its store key. Shared
// by `kbv run` on one machine (schedule/suite.hpp) and across a Ray cluster (schedule/ray_run.hpp),
// so both resume alike.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "schedule/discovery.hpp"
#include "schedule/suite.hpp"
#include "store/store.hpp"

namespace kbv::schedule {

// The tasks left to evaluate, in evaluation order (a problem's candidates in a row), with what
// each needs more than once: its store key and build-cache folder (each file hashed once per
// run).
struct WorkList {
  std::vector<const Task*> tasks;  // into the tasks given to work_left
  std::vector<std::string> keys;
  std::vector<std::filesystem::path> caches;
  std::vector<std::string> candidate_sha256;
  std::vector<std::string> problem_sha256;
};

// Counts what is stored already (and what is evaluated again) in `summary`.
WorkList work_left(const std::vector<Task>& found, const store::Store& db,
                   const SuiteRequest& request, SuiteSummary& summary);

}  // namespace kbv::schedule
