#include "schedule/build_ahead.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <memory>
#include <set>

#include "core/clock.hpp"
#include "eval/workspace.hpp"
#include "orchestrate/build_cache.hpp"
#include "orchestrate/worker_options.hpp"

namespace kbv::schedule {
namespace fs = std::filesystem;
namespace cmd = orchestrate::cmd;

void build_ahead(const std::vector<const Task*>& tasks, const std::vector<fs::path>& caches,
                 const eval::EvalRequest& settings, int jobs, const fs::path& scratch,
                 const std::function<void(const fs::path&, double)>& built) {
  struct Pending {
    const Task* task;
    fs::path cache;
  };
  std::deque<Pending> queue;
  std::set<fs::path> seen;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const fs::path& dir = caches[i];
    if (!seen.insert(dir).second) continue;
    if (fs::exists(dir / orchestrate::kBuiltMarker) ||
        !orchestrate::builds_on_import(tasks[i]->candidate.path)) {
      built(dir, 0.0);
    } else {
      queue.push_back({tasks[i], dir});
    }
  }
  struct Running {
    std::unique_ptr<orchestrate::WorkerProcess> worker;
    Clock::time_point started;
    fs::path cache;
  };
  std::vector<Running> running;
  size_t done = 0, total = queue.size();
  int index = 0;
  const auto& progress = settings.placement.progress;
  // Made now if no evaluation has made it yet: the build workers' sandbox hides it.
  const fs::path work_root = eval::work_root(settings.placement.work_dir);
  fs::create_directories(work_root);
  while (!queue.empty() || !running.empty()) {
    while (!queue.empty() && static_cast<int>(running.size()) < std::max(1, jobs)) {
      const auto [task, cache] = queue.front();
      queue.pop_front();
      auto dir = scratch / fmt::format("build-{}", index++);
      fs::create_directories(dir);
      orchestrate::make_scratch_folders(dir);
      fs::create_directories(cache);
      orchestrate::WorkerSpec spec;
      spec.kind = orchestrate::WorkerKind::Build;
      spec.size = settings.settings.size;
      spec.sandbox = settings.settings.sandbox;
      spec.folder = dir;
      spec.extension_cache = cache;
      spec.scratch_quota_bytes = settings.limits.max_scratch_bytes;
      spec.work_root = work_root;
      auto worker = std::make_unique<orchestrate::WorkerProcess>(orchestrate::worker_options(spec));
      worker->send(orchestrate::worker_request(
          cmd::kImport, {{"candidate", fs::absolute(task->candidate.path).string()}}));
      running.push_back({std::move(worker), Clock::now(), cache});
    }
    for (auto it = running.begin(); it != running.end();) {
      bool timed_out = seconds_since(it->started) > settings.limits.compile_timeout.count();
      if (it->worker->ready(std::chrono::milliseconds(50)) || timed_out) {
        std::vector<orchestrate::LoadedLibrary> loaded;
        if (!timed_out) {
          auto answer = it->worker->receive(std::chrono::milliseconds(1000));
          if (answer.ok()) {
            std::ofstream(it->cache / orchestrate::kBuiltMarker) << "built\n";
            loaded = orchestrate::loaded_libraries(
                answer.result.value("extension_files", nlohmann::json::object()), it->cache);
          }
        }
        it->worker->stop();
        // What it built and loaded, as recorded at the load: an evaluation that loads anything
        // else from this folder later (a library swapped after the build) is rejected.
        orchestrate::record_in_manifest(it->cache, loaded);
        built(it->cache, seconds_since(it->started));
        it = running.erase(it);
        ++done;
        if (progress) progress(fmt::format("built {}/{} candidates", done, total));
      } else {
        ++it;
      }
    }
  }
}

void BuildBoard::built(const fs::path& cache, double seconds) {
  {
    std::lock_guard guard(mutex_);
    seconds_[cache] = seconds;
  }
  changed_.notify_all();
}

void BuildBoard::finish() {
  {
    std::lock_guard guard(mutex_);
    finished_ = true;
  }
  changed_.notify_all();
}

bool BuildBoard::is_built(const fs::path& cache) {
  std::lock_guard guard(mutex_);
  return ended(cache);
}

double BuildBoard::wait(const fs::path& cache) {
  std::unique_lock guard(mutex_);
  changed_.wait(guard, [&] { return ended(cache); });
  auto it = seconds_.find(cache);
  return it == seconds_.end() ? 0.0 : it->second;
}

}  // namespace kbv::schedule
