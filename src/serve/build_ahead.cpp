#include "serve/build_ahead.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "orchestrate/build_cache.hpp"
#include "schedule/build_ahead.hpp"

namespace kbv::serve {

namespace fs = std::filesystem;

BuildAhead::BuildAhead(eval::EvalRequest settings, std::string device, int jobs, fs::path scratch)
    : settings_(std::move(settings)), device_(std::move(device)), scratch_(std::move(scratch)) {
  settings_.placement.progress = nullptr;  // one line per build would drown the job lines
  fs::create_directories(scratch_);
  for (int k = 0; k < jobs; ++k) threads_.emplace_back([this] { run(); });
}

BuildAhead::~BuildAhead() { stop(); }

void BuildAhead::stop() {
  {
    std::lock_guard guard(mutex_);
    stopped_ = true;
    queue_.clear();
    changed_.notify_all();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void BuildAhead::add(const fs::path& candidate, const std::string& candidate_sha256) {
  const fs::path cache =
      orchestrate::extension_cache_dir(settings_.placement.cache_dir, candidate_sha256, device_);
  if (fs::exists(cache / orchestrate::kBuiltMarker) || !orchestrate::builds_on_import(candidate)) {
    return;
  }
  std::lock_guard guard(mutex_);
  if (stopped_ || !known_.insert(cache).second) return;
  queue_.push_back({candidate, cache});
  changed_.notify_all();
}

void BuildAhead::before_evaluation(const std::string& candidate_sha256) {
  const fs::path cache =
      orchestrate::extension_cache_dir(settings_.placement.cache_dir, candidate_sha256, device_);
  std::unique_lock lock(mutex_);
  std::erase_if(queue_, [&](const Pending& p) { return p.cache == cache; });
  changed_.wait(lock, [&] { return !building_.contains(cache); });
}

void BuildAhead::run() {
  int index = 0;
  while (true) {
    Pending next;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
      if (stopped_) return;
      next = queue_.front();
      queue_.pop_front();
      building_.insert(next.cache);
    }
    // kbv run's builder, for one candidate: a sandboxed build worker at a lower priority that
    // imports it (compiling into the cache folder) and records what it loaded in the manifest.
    schedule::Task task;
    task.candidate.path = next.candidate;
    const fs::path scratch =
        scratch_ /
        fmt::format("t{}-{}", std::hash<std::thread::id>{}(std::this_thread::get_id()), index++);
    try {
      schedule::build_ahead({&task}, {next.cache}, settings_, 1, scratch,
                            [](const fs::path&, double) {});
    } catch (const std::exception&) {
      // Not an error here: the evaluation builds it again and reports its failure.
    }
    std::error_code ec;
    fs::remove_all(scratch, ec);
    std::lock_guard guard(mutex_);
    building_.erase(next.cache);
    changed_.notify_all();
  }
}

}  // namespace kbv::serve
