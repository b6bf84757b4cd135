// A failure on a shared device, evaluated again with the device to itself: the rule and the
// mechanism, shared by `kbv run`'s device threads (schedule/suite.cpp) and `kbv serve`'s
// evaluation threads (serve/eval_pool.cpp), so both store the same verdict for the same outcome.
//
// Several evaluations at once on a device (--workers-per-device, or a device named twice) share
// its memory and its time: a runtime_error or a timeout beside them may be theirs (device memory
// taken, a hang slowing every context), and so may the reference running out of device memory
// (their cases and workers held it). Such a first attempt is not stored. It is deferred until the
// evaluations in progress on its device have finished, then evaluated again with no gate and no
// other evaluation on the device, and that second verdict is stored with the flag
// `evaluated_alone` naming the first. New evaluations on the device wait meanwhile: a failure
// costs one drain of the device, however long the run.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "eval/eval_request.hpp"

namespace kbv::schedule {

// The rule: true when `result`, from an evaluation that shared its device with
// `evaluations_on_device - 1` others, may have been caused by them; with `draws_ahead_beside`,
// its reference running out of device memory also when it was the device's only evaluation.
bool needs_retry_alone(const Result& result, int evaluations_on_device,
                       bool draws_ahead_beside = false);

// kbv run draws the next problem's cases ahead on `device` beside the evaluation in progress
// there, even the device's only one: on a GPU that memory may be what its reference ran out of.
// (On the host the memory plan's budget comes from what is free, and the candidate's heap has a
// cap of its own.)
bool draws_ahead_beside(const std::string& device);

// "runtime_error: <the reason's first line>": the first attempt, as the flag names it.
std::string first_attempt(const Result& result);

// The second attempt's request: no gate (no one else is on the device), the device's memory to
// itself in the memory plan.
void place_alone(eval::EvalRequest& request);

// Adds `evaluated_alone` to the second attempt's result, naming the first.
void mark_evaluated_alone(Result& result, const std::string& first_attempt);

// The mechanism, per device: evaluations enter and leave; a retry deferred on a device makes new
// evaluations there wait, and runs once none is in progress. `Retry` is whatever the caller
// needs to evaluate it again (kbv run: a task's index; kbv serve: a job).
template <typename Retry>
class AloneRetries {
 public:
  // An evaluation starts on `device` and is counted until leave(); false (nothing counted) when
  // a retry waits for the device or runs there: the caller runs run_waiting() first.
  bool try_enter(const std::string& device) {
    std::lock_guard guard(lock_);
    if (pending(device)) return false;
    ++busy_[device];
    return true;
  }

  void leave(const std::string& device) {
    std::lock_guard guard(lock_);
    if (--busy_[device] == 0) changed_.notify_all();
  }

  // A first attempt that failed on a shared `device` (the caller has left() its evaluation or
  // has not entered one): evaluated again by run_waiting().
  void defer(const std::string& device, Retry retry) {
    std::lock_guard guard(lock_);
    deferred_.emplace_back(device, std::move(retry));
    changed_.notify_all();
  }

  // Whether a retry waits for `device` or runs there.
  bool waiting(const std::string& device) const {
    std::lock_guard guard(lock_);
    return pending(device);
  }

  // When retries wait for `device`: lets the calling thread's kept work go (`let_go()`: its
  // reference sessions and workers started ahead hold device memory), then waits until no
  // evaluation is in progress on the device. The first thread to see that takes every retry of
  // the device and runs each (`run(retry)`, without any lock held), lets its work go again; the
  // others wait for it. Returns once no retry waits for or runs on the device; at once when none
  // did.
  template <typename LetGo, typename Run>
  void run_waiting(const std::string& device, LetGo&& let_go, Run&& run) {
    std::unique_lock lock(lock_);
    if (!pending(device)) return;
    lock.unlock();
    let_go();
    lock.lock();
    while (pending(device)) {
      if (deferred_here(device) && !retrying_.count(device) && busy_[device] == 0) {
        std::vector<Retry> mine;
        for (auto it = deferred_.begin(); it != deferred_.end();) {
          if (it->first == device) {
            mine.push_back(std::move(it->second));
            it = deferred_.erase(it);
          } else {
            ++it;
          }
        }
        retrying_.insert(device);
        lock.unlock();
        for (auto& retry : mine) run(retry);
        let_go();
        lock.lock();
        retrying_.erase(device);
        changed_.notify_all();
      } else {
        changed_.wait(lock);
      }
    }
  }

 private:
  bool deferred_here(const std::string& device) const {
    return std::any_of(deferred_.begin(), deferred_.end(),
                       [&](const auto& d) { return d.first == device; });
  }
  bool pending(const std::string& device) const {
    return retrying_.count(device) > 0 || deferred_here(device);
  }

  mutable std::mutex lock_;
  std::condition_variable changed_;  // busy, deferred or retrying changed
  std::map<std::string, int> busy_;  // evaluations in progress, per device
  std::vector<std::pair<std::string, Retry>> deferred_;
  std::set<std::string> retrying_;  // devices running their retries alone
};

}  // namespace kbv::schedule
