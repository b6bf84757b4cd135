// Which task an evaluation thread of `kbv run` takes next, and the reservations behind workers
// started ahead: a reserved task is evaluated exactly once, by its thread or by an idle one.
#include "schedule/task_picker.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace {

using kbv::schedule::Task;
using kbv::schedule::TaskPicker;

std::vector<Task> tasks_of(const std::vector<std::string>& problems) {
  std::vector<Task> tasks;
  for (size_t i = 0; i < problems.size(); ++i) {
    Task t;
    t.problem.path = problems[i];
    t.candidate.path = "c" + std::to_string(i) + ".py";
    tasks.push_back(t);
  }
  return tasks;
}

std::vector<const Task*> pointers(const std::vector<Task>& tasks) {
  std::vector<const Task*> out;
  for (const auto& t : tasks) out.push_back(&t);
  return out;
}

const std::set<std::filesystem::path> kNoneBroken;
bool all_built(size_t) { return true; }

TEST(TaskPicker, PrefersTheProblemItHoldsThenOneNoThreadIsOn) {
  auto tasks = tasks_of({"a", "a", "b", "c"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  EXPECT_EQ(picker.pick("", kNoneBroken, all_built), 0u);
  EXPECT_EQ(picker.pick("a", kNoneBroken, all_built), 1u);  // same problem
  EXPECT_EQ(picker.pick("", kNoneBroken, all_built), 2u);   // another thread: b, no one on it
}

TEST(TaskPicker, AReservedTaskIsClaimedOnceAndNotPickedByOthers) {
  auto tasks = tasks_of({"a", "a"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  auto first = picker.pick("", kNoneBroken, all_built);
  auto next = picker.pick("a", kNoneBroken, all_built, /*reserve=*/true);
  ASSERT_TRUE(first && next);
  EXPECT_FALSE(picker.pick("", kNoneBroken, all_built));  // nothing open
  EXPECT_TRUE(picker.claim(*next));
  EXPECT_FALSE(picker.claim(*next));  // already its thread's
  EXPECT_FALSE(picker.steal(""));     // nothing reserved any more
}

TEST(TaskPicker, AnIdleThreadStealsAReservationAndTheOwnerLearnsIt) {
  auto tasks = tasks_of({"a", "a"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  picker.pick("", kNoneBroken, all_built);
  auto next = picker.pick("a", kNoneBroken, all_built, /*reserve=*/true);
  ASSERT_TRUE(next);
  EXPECT_FALSE(picker.pick("", kNoneBroken, all_built));
  EXPECT_EQ(picker.steal(""), next);
  EXPECT_FALSE(picker.claim(*next));  // the owner must pick again, not evaluate it twice
  EXPECT_FALSE(picker.steal(""));
}

TEST(TaskPicker, APutBackReservationIsOpenAgainButATakenTaskIsNot) {
  auto tasks = tasks_of({"a", "b"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  auto first = picker.pick("", kNoneBroken, all_built);
  auto next = picker.pick("a", kNoneBroken, all_built, /*reserve=*/true);
  ASSERT_TRUE(first && next);
  picker.put_back(*first);  // taken, not reserved: stays taken
  picker.put_back(*next);
  EXPECT_EQ(picker.pick("", kNoneBroken, all_built), next);
  EXPECT_FALSE(picker.pick("", kNoneBroken, all_built));
}

TEST(TaskPicker, BrokenProblemsAreSkipped) {
  auto tasks = tasks_of({"a", "b"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  std::set<std::filesystem::path> broken{"a"};
  EXPECT_EQ(picker.pick("", broken, all_built), 1u);
  EXPECT_FALSE(picker.pick("", broken, all_built));
}

TEST(TaskPicker, APostponedTaskComesAfterEveryOtherOpenTask) {
  auto tasks = tasks_of({"big", "a", "b"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  auto nothing_built = [](size_t) { return false; };
  ASSERT_EQ(picker.pick("", kNoneBroken, all_built), 0u);
  EXPECT_TRUE(picker.others_open(kNoneBroken));
  picker.postpone(0);  // its evaluation needs the device alone: after the others
  EXPECT_TRUE(picker.postponed(0));
  // Not even the problem the thread holds, nor an unbuilt task of another, comes after it.
  EXPECT_EQ(picker.pick("big", kNoneBroken, nothing_built), 1u);
  EXPECT_TRUE(picker.others_open(kNoneBroken));
  EXPECT_EQ(picker.pick("a", kNoneBroken, all_built, /*reserve=*/true), 2u);
  EXPECT_FALSE(picker.others_open(kNoneBroken));  // only the postponed one is open
  EXPECT_EQ(picker.pick("", kNoneBroken, all_built), 0u);
  EXPECT_TRUE(picker.postponed(0));  // once: its thread evaluates it this time
  EXPECT_FALSE(picker.pick("", kNoneBroken, all_built));
  EXPECT_TRUE(picker.claim(2u));
}

TEST(TaskPicker, AProblemsOpenTasksArePostponedTogetherAndOnlyOnce) {
  auto tasks = tasks_of({"big", "big", "big", "a"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  ASSERT_EQ(picker.pick("", kNoneBroken, all_built), 0u);
  ASSERT_EQ(picker.pick("big", kNoneBroken, all_built, /*reserve=*/true), 1u);  // its next
  EXPECT_EQ(picker.postpone(0), 2);  // task 0 and the open task 2; the reserved 1 is its own
  EXPECT_FALSE(picker.postponed(1));
  EXPECT_TRUE(picker.postponed(2));
  // The thread holds "big", yet "a" comes first; then the postponed ones, the thread's first.
  EXPECT_EQ(picker.pick("big", kNoneBroken, all_built), 3u);
  EXPECT_EQ(picker.pick("big", kNoneBroken, all_built), 0u);
  EXPECT_EQ(picker.pick("big", kNoneBroken, all_built), 2u);
  EXPECT_EQ(picker.postpone(2), 0);  // taken again after being postponed: none anew
  EXPECT_TRUE(picker.claim(1u));
}

TEST(TaskPicker, ABrokenProblemsTasksDoNotKeepAPostponedTaskWaiting) {
  auto tasks = tasks_of({"big", "broken"});
  auto list = pointers(tasks);
  TaskPicker picker(list);
  ASSERT_EQ(picker.pick("", kNoneBroken, all_built), 0u);
  picker.postpone(0);
  const std::set<std::filesystem::path> broken{"broken"};
  EXPECT_TRUE(picker.others_open(kNoneBroken));
  EXPECT_FALSE(picker.others_open(broken));
  EXPECT_EQ(picker.pick("", broken, all_built), 0u);
}

}  // namespace
