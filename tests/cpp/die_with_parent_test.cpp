// die_with_parent: a child kbv forks must not outlive an orchestrator that died before the
// child asked for its death signal (the race that left a killed kbv serve's workers running).
// The race is made certain here: the middle process forks the child and exits at once, and the
// child calls die_with_parent only after it has been re-parented.

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "orchestrate/sandbox.hpp"

namespace kbv::orchestrate {
namespace {

// Forks a middle process that forks a child and exits; the child waits for its re-parenting,
// calls `guard` with the middle process's pid, and writes "alive" if it is still running.
// Returns what the child wrote (empty when it ended first).
template <typename Guard>
std::string child_output_after_its_parent_died(Guard guard) {
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  // Orphans are re-parented to the nearest subreaper: this test process, so it can reap them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t middle = ::fork();
  if (middle == 0) {
    const pid_t parent = ::getpid();
    if (::fork() == 0) {
      ::close(out[0]);
      while (::getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      guard(parent);
      (void)!::write(out[1], "alive", 5);
      _exit(0);
    }
    _exit(0);  // the orchestrator killed between the fork and the child's first line
  }
  ::close(out[1]);
  std::string text;
  char buffer[16];
  ssize_t n;
  while ((n = ::read(out[0], buffer, sizeof buffer)) > 0) text.append(buffer, n);
  ::close(out[0]);
  while (::waitpid(-1, nullptr, 0) > 0) {
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  return text;
}

TEST(DieWithParent, AChildWhoseParentDiedBeforeItsFirstLineEndsAtOnce) {
  EXPECT_EQ(child_output_after_its_parent_died([](pid_t parent) { die_with_parent(parent); }), "");
}

TEST(DieWithParent, TheDeathSignalAloneWouldComeTooLate) {
  // What kbv did before: the signal asked for, the parent already gone; the child lives on.
  EXPECT_EQ(child_output_after_its_parent_died([](pid_t) { ::prctl(PR_SET_PDEATHSIG, SIGKILL); }),
            "alive");
}

TEST(DieWithParent, AChildWhoseParentLivesCarriesOn) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    die_with_parent(parent);
    (void)!::write(out[1], "alive", 5);
    _exit(0);
  }
  ::close(out[1]);
  char buffer[8] = {};
  EXPECT_EQ(::read(out[0], buffer, sizeof buffer), 5);
  EXPECT_EQ(std::string(buffer), "alive");
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace kbv::orchestrate
