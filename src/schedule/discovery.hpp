// Finding problems and candidates on disk, in KernelBench's layouts and kbv's own, and pairing
// them. Anything that cannot be paired is reported with the reason, never dropped silently.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kbv::schedule {

struct Problem {
  std::filesystem::path path;
  std::string name;  // file stem, e.g. "19_ReLU"
  std::optional<int> level, id;
};

struct Candidate {
  std::filesystem::path path;
  std::string run;  // the run or model folder, relative to the candidates root
  std::optional<int> level, problem_id, sample;
  std::string problem_name;  // plain layout: the problem's file stem
};

struct Task {
  Problem problem;
  Candidate candidate;
};

struct Unmatched {
  std::filesystem::path path;
  std::string reason;
};

struct Discovery {
  std::vector<Task> tasks;
  std::vector<Unmatched> unmatched;
};

// Problems: every .py under `root`; the level from a `level<L>` folder, the id from a leading
// `<N>_` in the file name (KernelBench's `level1/19_ReLU.py`).
std::vector<Problem> find_problems(const std::filesystem::path& root);

// Candidates: every .py under `root`, in either layout:
//   KernelBench generations: `<run>/level_<L>_problem_<P>_sample_<S>_kernel.py`
//   plain:                   `<run>/level<L>/<N>_<Name>.py` or `<run>/<Name>.py`, naming the
//   problem
// A file that matches neither, or names a problem not in `problems`, is unmatched with a reason.
Discovery pair_candidates(const std::vector<Problem>& problems, const std::filesystem::path& root);

}  // namespace kbv::schedule
