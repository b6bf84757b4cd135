#include "schedule/work_list.hpp"

#include <algorithm>
#include <map>

#include "core/hash.hpp"
#include "orchestrate/build_cache.hpp"
#include "schedule/resume.hpp"

namespace kbv::schedule {
namespace fs = std::filesystem;
using nlohmann::json;

WorkList work_left(const std::vector<Task>& found, const store::Store& db,
                   const SuiteRequest& request, SuiteSummary& summary) {
  const json settings = request.settings.settings.key();
  // Candidates of one problem in a row, so each device's kept reference serves them all.
  std::vector<const Task*> ordered;
  for (const auto& task : found) ordered.push_back(&task);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto* a, const auto* b) { return a->problem.path < b->problem.path; });
  if (request.interleave_levels) interleave_by_level(ordered);
  WorkList work;
  std::map<fs::path, std::string> problem_sha;
  for (const auto* task : ordered) {
    auto& p = problem_sha[task->problem.path];
    if (p.empty()) p = sha256_file(task->problem.path);
    const std::string candidate_sha = sha256_file(task->candidate.path);
    auto key = store::run_key(p, candidate_sha, settings);
    if (auto stored = db.get(key)) {
      if (!evaluate_again(*stored, request.settings.limits)) {
        ++summary.already_done;
        continue;
      }
      ++(stored->value("verdict", "") == "harness_error" ? summary.harness_errors_again
                                                         : summary.evaluated_again);
    }
    work.tasks.push_back(task);
    work.keys.push_back(key);
    work.candidate_sha256.push_back(candidate_sha);
    work.problem_sha256.push_back(p);
    work.caches.push_back(orchestrate::extension_cache_dir(
        request.settings.placement.cache_dir, candidate_sha, request.settings.settings.device));
  }
  return work;
}

}  // namespace kbv::schedule
