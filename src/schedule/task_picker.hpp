// Which task each evaluation thread of `kbv run` takes next (src/eval/suite.cpp). Not
// thread-safe: the suite calls it under its own lock.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "schedule/discovery.hpp"

namespace kbv::schedule {

// Which task an evaluation thread takes next. In order of preference: one of the problem whose
// reference it holds (no new reference work); one of a problem no thread is on, already built;
// the same, not yet built; then any (a second reference session for a problem, rather than an
// idle thread). Tasks postponed (postpone()) come only when no other task is open.
class TaskPicker {
 public:
  explicit TaskPicker(const std::vector<const Task*>& tasks)
      : tasks_(tasks), state_(tasks.size(), State::Open), postponed_(tasks.size(), false) {}

  // Under the caller's lock. `current`: the problem of the thread's last task (empty at first).
  // `reserve`: the task is taken as the thread's next one (claim() makes it its own, put_back()
  // returns it, and an idle thread may steal() it meanwhile).
  std::optional<size_t> pick(const std::filesystem::path& current,
                             const std::set<std::filesystem::path>& broken,
                             const std::function<bool(size_t)>& built, bool reserve = false) {
    for (const bool postponed : {false, true}) {
      std::optional<size_t> unowned, unowned_unbuilt, any;
      for (size_t i = 0; i < tasks_.size(); ++i) {
        if (state_[i] != State::Open || postponed_[i] != postponed ||
            broken.count(tasks_[i]->problem.path)) {
          continue;
        }
        const auto& problem = tasks_[i]->problem.path;
        if (!current.empty() && problem == current) return take(i, current, reserve);
        if (active_[problem] == 0) {
          if (!unowned && built(i)) unowned = i;
          if (!unowned_unbuilt) unowned_unbuilt = i;
        }
        if (!any) any = i;
      }
      if (unowned) return take(*unowned, current, reserve);
      if (unowned_unbuilt) return take(*unowned_unbuilt, current, reserve);
      if (any) return take(*any, current, reserve);
    }
    return std::nullopt;
  }
  // A task its thread took (or reserved) and will evaluate later, after every task not
  // postponed: kbv run's device threads postpone a task whose evaluation needs the device's
  // memory to itself, so that such evaluations run one after another at the end behind one
  // drain of the device instead of each draining it in the middle of the run (session 24's
  // H100 audit: 38 of 250 problems had the device alone, one reference at most in flight for
  // 667 s of 1,001). Once: a postponed task is evaluated when it comes again.
  // The problem's other open tasks are postponed with it: each would drain the device in turn.
  // Returns how many tasks were postponed now.
  int postpone(size_t i) {
    state_[i] = State::Open;
    int now = 0;
    for (size_t k = 0; k < tasks_.size(); ++k) {
      if (state_[k] == State::Open && !postponed_[k] &&
          tasks_[k]->problem.path == tasks_[i]->problem.path) {
        postponed_[k] = true;
        ++now;
      }
    }
    return now;
  }
  bool postponed(size_t i) const { return postponed_[i]; }
  // Whether an open task (neither taken nor reserved) is not postponed and not of a problem in
  // `broken`: what a thread would take before a postponed one.
  bool others_open(const std::set<std::filesystem::path>& broken) const {
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (state_[i] == State::Open && !postponed_[i] && !broken.count(tasks_[i]->problem.path)) {
        return true;
      }
    }
    return false;
  }
  // The reserving thread takes its reserved task; false when another thread stole it.
  bool claim(size_t i) {
    if (state_[i] != State::Reserved) return false;
    state_[i] = State::Taken;
    return true;
  }
  // A thread with nothing left to pick takes a task another thread reserved, so no task waits
  // behind a long evaluation while a thread is idle, and none is left behind when its thread
  // stops.
  std::optional<size_t> steal(const std::filesystem::path& current) {
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (state_[i] == State::Reserved) return take(i, current, /*reserve=*/false);
    }
    return std::nullopt;
  }
  // A reserved task its thread will not evaluate goes back to the others.
  void put_back(size_t i) {
    if (state_[i] == State::Reserved) state_[i] = State::Open;
  }
  // The thread leaves its problem (it stops, or takes another).
  void leave(const std::filesystem::path& problem) {
    if (!problem.empty() && active_[problem] > 0) --active_[problem];
  }

 private:
  enum class State { Open, Reserved, Taken };

  size_t take(size_t i, const std::filesystem::path& current, bool reserve) {
    state_[i] = reserve ? State::Reserved : State::Taken;
    const auto& problem = tasks_[i]->problem.path;
    if (problem != current) {
      leave(current);
      ++active_[problem];
    }
    return i;
  }

  const std::vector<const Task*>& tasks_;
  std::vector<State> state_;
  std::vector<bool> postponed_;
  std::map<std::filesystem::path, int> active_;
};

}  // namespace kbv::schedule
