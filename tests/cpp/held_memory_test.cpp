// Device memory held by the candidate when kbv's reference ran out of it: the rule
// (judge/held_memory.hpp) and its facts (eval/held_memory.hpp) from a constructed /proc and
// constructed driver listings. The driver's own listing (NVML) needs a GPU: the CUDA zoo's
// hacks/cuda/memory_hog.py runs it there.
#include "eval/held_memory.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "judge/held_memory.hpp"
#include "orchestrate/process_tree.hpp"

namespace kbv {
namespace {
namespace fs = std::filesystem;

constexpr double GB = 1e9;
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

judge::HeldMemory held(double held_bytes, double planned_bytes) {
  return {held_bytes, planned_bytes, "test"};
}

TEST(HeldMemoryRule, AnHonestCandidatesContextAndCachesAreNeverBlamed) {
  // A small problem plans little; the floor covers what every honest process holds anyway.
  EXPECT_FALSE(judge::held_beyond_plan(held(1.5 * GB, 0.1 * GB)));
  EXPECT_FALSE(judge::held_beyond_plan(held(4 * GiB, 0.1 * GB)));
  EXPECT_DOUBLE_EQ(judge::held_allowance(held(0, 0.1 * GB)), judge::kDeviceHeldFloor);
}

TEST(HeldMemoryRule, MoreThanTheWholeEvaluationsPlanIsTheCandidates) {
  EXPECT_TRUE(judge::held_beyond_plan(held(120 * GB, 0.1 * GB)));
  EXPECT_TRUE(judge::held_beyond_plan(held(4.5 * GiB, 0.1 * GB)));
  // A large problem's plan is the allowance: its honest candidate may hold its working set.
  EXPECT_FALSE(judge::held_beyond_plan(held(60 * GB, 70 * GB)));
  EXPECT_TRUE(judge::held_beyond_plan(held(71 * GB, 70 * GB)));
  const auto reason = judge::held_memory_reason(held(120 * GB, 10 * GB));
  EXPECT_NE(reason.find("device memory"), std::string::npos) << reason;
  EXPECT_NE(reason.find("120.00 GB"), std::string::npos) << reason;
  EXPECT_NE(reason.find("10.00 GB"), std::string::npos) << reason;
  const auto note = judge::held_memory_note(held(1 * GB, 0));
  EXPECT_NE(note.find("1.00 GB"), std::string::npos) << note;
}

TEST(HeldMemoryRule, ACandidatesOwnOutOfMemorySaysWhatItHeldOnlyBeyondThePlan) {
  const std::string own = "forward raised RuntimeError: cudaMallocAsync failed: out of memory";
  const auto hog = judge::own_out_of_memory_reason(own, held(75 * GB, 0.1 * GB));
  EXPECT_EQ(hog.rfind(own, 0), 0u) << hog;  // its own reason first, the figures after
  EXPECT_NE(hog.find("held 75.00 GB"), std::string::npos) << hog;
  // An honest candidate that runs out within its plan keeps its reason as it was.
  EXPECT_EQ(judge::own_out_of_memory_reason(own, held(3 * GB, 0.1 * GB)), own);
  EXPECT_EQ(judge::own_out_of_memory_reason(own, held(60 * GB, 70 * GB)), own);

  EXPECT_TRUE(judge::reads_out_of_memory("torch.OutOfMemoryError: CUDA out of memory."));
  EXPECT_TRUE(judge::reads_out_of_memory("cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY"));
  EXPECT_TRUE(judge::reads_out_of_memory("cudaErrorMemoryAllocation: out of memory"));
  EXPECT_FALSE(judge::reads_out_of_memory("RuntimeError: shape mismatch"));
  EXPECT_FALSE(judge::reads_out_of_memory("an illegal memory access was encountered"));
}

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kbv-held-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void process(int pid, int parent) {
    fs::create_directories(root_ / std::to_string(pid));
    std::ofstream(root_ / std::to_string(pid) / "status")
        << "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t" << pid << "\nPid:\t" << pid
        << "\nPPid:\t" << parent << "\nTracerPid:\t0\nVmRSS:\t  999 kB\n";
  }
  fs::path root_;
};

TEST_F(FakeProc, AProcessTreeIsTheProcessAndItsDescendants) {
  process(1, 0);
  process(40, 1);                          // the orchestrator
  process(41, 40);                         // the reference's relay
  process(43, 41);                         // the reference
  process(42, 40);                         // the candidate's relay
  process(44, 42);                         // the candidate's worker (its namespace's first process)
  process(50, 44);                         // a process it started
  process(51, 50);                         // and one that process started
  process(60, 1);                          // unrelated
  fs::create_directories(root_ / "self");  // not a process number
  fs::create_directories(root_ / "77");    // ended while the folder was read: no status
  EXPECT_EQ(orchestrate::process_tree(42, root_), (std::set<pid_t>{42, 44, 50, 51}));
  EXPECT_EQ(orchestrate::process_tree(41, root_), (std::set<pid_t>{41, 43}));
  EXPECT_EQ(orchestrate::process_tree(51, root_), (std::set<pid_t>{51}));
  EXPECT_TRUE(orchestrate::process_tree(99, root_).empty());  // gone
}

TEST(HeldMemoryRealProc, ThisProcessAndAChildAreATree) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    _exit(0);
  }
  auto tree = orchestrate::process_tree(::getpid());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(tree.count(::getpid()));
  EXPECT_TRUE(tree.count(child));
  EXPECT_FALSE(tree.count(::getppid()));
}

eval::DeviceProcess on_device(pid_t pid, std::optional<double> bytes) { return {pid, bytes}; }

TEST(HeldOnDevice, SumsTheCandidatesProcessesOnly) {
  const std::set<pid_t> candidate{42, 44, 50};
  const std::set<pid_t> reference{41, 43};
  // The reference's context, the candidate's worker and a process it started, a build worker
  // and another program: only the candidate's count.
  auto held = eval::shares_on_device(
      {on_device(43, 9 * GB), on_device(44, 100 * GB), on_device(50, 20 * GB),
       on_device(70, 5 * GB), on_device(80, 1 * GB), on_device(90, std::nullopt)},
      candidate, reference);
  ASSERT_TRUE(held);
  EXPECT_DOUBLE_EQ(held->candidate_bytes, 120 * GB);
  // The others are recorded beside it: the reference's, and everyone else's (a process the
  // driver gives no figure for counts nothing there).
  EXPECT_DOUBLE_EQ(held->reference_bytes, 9 * GB);
  EXPECT_DOUBLE_EQ(held->others_bytes, 6 * GB);
  // A candidate without a context on the device holds none of it.
  auto none = eval::shares_on_device({on_device(43, 9 * GB)}, candidate, reference);
  ASSERT_TRUE(none);
  EXPECT_DOUBLE_EQ(none->candidate_bytes, 0);
}

TEST(HeldOnDevice, AListingInAnotherNumberingOrWithoutFiguresTellsNothing) {
  const std::set<pid_t> candidate{42, 44};
  const std::set<pid_t> reference{41, 43};
  // The driver's pids are another namespace's: the reference is not among them, so a match of
  // the candidate's numbers would be chance.
  EXPECT_FALSE(eval::shares_on_device({on_device(9043, 9 * GB), on_device(44, 100 * GB)}, candidate,
                                      reference));
  EXPECT_FALSE(eval::shares_on_device({}, candidate, reference));
  // The driver does not say what the candidate's process holds (NVML_VALUE_NOT_AVAILABLE).
  EXPECT_FALSE(eval::shares_on_device({on_device(43, 9 * GB), on_device(44, std::nullopt)},
                                      candidate, reference));
}

TEST(HeldOnDevice, OnlyTheReferencesDeviceAllocationOnAGpuIsWeighed) {
  HarnessFault device{FaultKind::OutOfMemory, "judging", "CUDA out of memory"};
  device.memory = "device";
  HarnessFault host{FaultKind::OutOfMemory, "drawing", "MemoryError"};
  host.memory = "host";
  HarnessFault unsaid{FaultKind::OutOfMemory, "drawing", "std::bad_alloc"};  // kbv's own
  HarnessFault crashed{FaultKind::ReferenceCrashed, "drawing", "killed by signal 9"};
  crashed.memory = "device";
  EXPECT_TRUE(eval::weighs_held_memory(device, true));
  EXPECT_FALSE(eval::weighs_held_memory(device, false));
  EXPECT_FALSE(eval::weighs_held_memory(host, true));
  EXPECT_FALSE(eval::weighs_held_memory(unsaid, true));
  EXPECT_FALSE(eval::weighs_held_memory(crashed, true));
  // A baseline's library plan chosen for want of room (python/kbv/plan_pressure.py): weighed
  // like the device's memory (a hog would starve the reference's first calls into a harness
  // error otherwise); only a candidate beyond its whole evaluation's plan is blamed.
  HarnessFault plan{FaultKind::OutOfMemory, "timing the baseline", "chose a library plan"};
  plan.memory = "library_plan";
  EXPECT_TRUE(eval::weighs_held_memory(plan, true));
  EXPECT_FALSE(eval::weighs_held_memory(plan, false));
}

TEST(HeldOnDevice, TheReadingFromTheDriversListToTheRule) {
  // This process plays the reference's relay, a child of it the reference itself; another child
  // plays the candidate's relay, and its child the candidate's worker.
  auto spawn = [](auto&& in_child) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      in_child();
      ::pause();
      _exit(0);
    }
    return pid;
  };
  const pid_t reference = spawn([] {});
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t candidate_relay = spawn([&] {
    const pid_t worker = ::fork();
    if (worker == 0) {
      ::pause();
      _exit(0);
    }
    (void)::write(ready[1], &worker, sizeof worker);
  });
  pid_t candidate_worker = 0;
  ASSERT_EQ(::read(ready[0], &candidate_worker, sizeof candidate_worker),
            static_cast<ssize_t>(sizeof candidate_worker));
  std::string asked;
  auto listing = [&](const std::string& uuid, std::string&) {
    asked = uuid;
    return std::optional<std::vector<eval::DeviceProcess>>{
        {{reference, 9 * GB}, {candidate_worker, 100 * GB}, {::getppid(), 30 * GB}}};
  };
  std::string why;
  auto held =
      eval::candidate_held_memory(candidate_relay, ::getpid(), "abc-123", 10 * GB, why, listing);
  auto without = [](const std::string&, std::string& why) {
    why = "NVML is not available";
    return std::optional<std::vector<eval::DeviceProcess>>{};
  };
  std::string why_not;
  auto unread = eval::candidate_held_memory(candidate_relay, ::getpid(), "abc-123", 10 * GB,
                                            why_not, without);
  for (pid_t pid : {reference, candidate_relay}) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  ::kill(candidate_worker, SIGKILL);  // reparented: reaped by whoever inherited it
  ASSERT_TRUE(held) << why;
  EXPECT_EQ(asked, "abc-123");
  EXPECT_DOUBLE_EQ(held->held_bytes, 100 * GB);  // the worker's; not the reference's or another's
  EXPECT_DOUBLE_EQ(held->reference_bytes, 9 * GB);
  EXPECT_DOUBLE_EQ(held->others_bytes, 30 * GB);
  EXPECT_DOUBLE_EQ(held->planned_bytes, 10 * GB);
  EXPECT_TRUE(judge::held_beyond_plan(*held));
  EXPECT_FALSE(unread);
  EXPECT_EQ(why_not, "NVML is not available");
}

TEST(HeldOnDevice, WithoutTheDriverNothingIsRead) {
  // This machine has no libnvidia-ml (CI): the reading says why, and nothing is blamed.
  std::string why;
  auto held = eval::candidate_held_memory(::getpid(), ::getppid(), "GPU-none", 0, why);
  if (!held) {
    EXPECT_FALSE(why.empty());
  }
  std::string no_uuid;
  EXPECT_FALSE(eval::candidate_held_memory(::getpid(), ::getppid(), "", 0, no_uuid));
  EXPECT_NE(no_uuid.find("did not name"), std::string::npos) << no_uuid;
}

}  // namespace
}  // namespace kbv
