// Builds ahead of evaluation for kbv serve: RL's samples are distinct files, so each candidate
// that compiles an extension on import would otherwise build inside its evaluation, one at a time
// per evaluation thread, while the CPUs idle. As kbv run does (schedule/build_ahead), accepted
// candidates are imported in sandboxed build workers, `jobs` at a time, into the content-keyed
// build cache; an evaluation waits for its candidate's build when it is running, and builds it
// itself when it has not started yet.
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "eval/eval_request.hpp"

namespace kbv::serve {

class BuildAhead {
 public:
  // `settings`: the server's (sandbox, size, limits, cache and work folders); `device`: whose
  // kind keys the cache folders; `scratch`: the build workers' folders.
  BuildAhead(eval::EvalRequest settings, std::string device, int jobs,
             std::filesystem::path scratch);
  ~BuildAhead();
  BuildAhead(const BuildAhead&) = delete;
  BuildAhead& operator=(const BuildAhead&) = delete;

  // Queues the candidate's build unless its folder is built, queued or building already.
  void add(const std::filesystem::path& candidate, const std::string& candidate_sha256);
  // Before the candidate's evaluation: waits while its build runs; a build still queued is
  // dropped (the evaluation builds it, under the same cache folder).
  void before_evaluation(const std::string& candidate_sha256);
  // No more builds start; the running ones end.
  void stop();

 private:
  struct Pending {
    std::filesystem::path candidate;
    std::filesystem::path cache;
  };
  void run();

  eval::EvalRequest settings_;
  std::string device_;
  std::filesystem::path scratch_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> queue_;
  std::set<std::filesystem::path> known_;     // queued, building or built by this service
  std::set<std::filesystem::path> building_;  // building now
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kbv::serve
