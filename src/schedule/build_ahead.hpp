// kbv run's builds beside the evaluation: one thread imports candidates `jobs` at a time, each in
// its own sandboxed build worker at a lower CPU priority, which compiles their extensions into
// the content-keyed cache; each build is announced as soon as it ends, so an evaluation waits
// only for its own candidate's build.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "eval/eval_request.hpp"
#include "schedule/discovery.hpp"

namespace kbv::schedule {

// Builds the tasks' candidates in the order given (the evaluation order). `caches[i]` is the
// build-cache folder of `tasks[i]`; `scratch` holds the build workers' folders. `built(cache,
// wall seconds)` is called once per folder as its build ends (0 s for one built before or one
// that builds nothing on import). A failed build is not an error here: the evaluation reports
// it as compile_error.
void build_ahead(const std::vector<const Task*>& tasks,
                 const std::vector<std::filesystem::path>& caches,
                 const eval::EvalRequest& settings, int jobs, const std::filesystem::path& scratch,
                 const std::function<void(const std::filesystem::path&, double)>& built);

// What the evaluation threads know of the builds running beside them.
class BuildBoard {
 public:
  void built(const std::filesystem::path& cache, double seconds);
  void finish();  // every build ended (or building ahead stopped)
  bool is_built(const std::filesystem::path& cache);
  // Waits until this candidate's build ended (or every build did); returns its wall seconds.
  double wait(const std::filesystem::path& cache);

 private:
  bool ended(const std::filesystem::path& cache) const {
    return finished_ || seconds_.count(cache) != 0;
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::filesystem::path, double> seconds_;
  bool finished_ = false;
};

}  // namespace kbv::schedule
