#include "schedule/discovery.hpp"

#include <algorithm>
#include <regex>

namespace kbv::schedule {
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> python_files(const fs::path& root) {
  std::vector<fs::path> files;
  if (fs::is_regular_file(root)) return {root};
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".py") continue;
    auto name = entry.path().filename().string();
    if (name.starts_with("_") || name.starts_with(".")) continue;  // __init__.py, helpers
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::optional<int> level_of_folder(const fs::path& folder) {
  static const std::regex level(R"(level_?(\d+))");
  std::smatch m;
  auto name = folder.filename().string();
  if (std::regex_match(name, m, level)) return std::stoi(m[1]);
  return std::nullopt;
}

std::optional<int> leading_id(const std::string& stem) {
  static const std::regex id(R"((\d+)_.*)");
  std::smatch m;
  if (std::regex_match(stem, m, id)) return std::stoi(m[1]);
  return std::nullopt;
}

}  // namespace

std::vector<Problem> find_problems(const fs::path& root) {
  std::vector<Problem> problems;
  for (const auto& path : python_files(root)) {
    Problem p{path, path.stem().string(), level_of_folder(path.parent_path()),
              leading_id(path.stem().string())};
    problems.push_back(std::move(p));
  }
  return problems;
}

Discovery pair_candidates(const std::vector<Problem>& problems, const fs::path& root) {
  static const std::regex kernelbench(R"(level_(\d+)_problem_(\d+)_sample_(\d+)_kernel)");
  Discovery out;
  for (const auto& path : python_files(root)) {
    Candidate c;
    c.path = path;
    auto stem = path.stem().string();
    std::smatch m;
    const Problem* problem = nullptr;
    fs::path run_folder = path.parent_path();
    if (std::regex_match(stem, m, kernelbench)) {
      c.level = std::stoi(m[1]);
      c.problem_id = std::stoi(m[2]);
      c.sample = std::stoi(m[3]);
      for (const auto& p : problems) {
        if (p.level == c.level && p.id == c.problem_id) problem = &p;
      }
      if (!problem) {
        out.unmatched.push_back({path, "names level " + std::to_string(*c.level) + " problem " +
                                           std::to_string(*c.problem_id) +
                                           ", which is not among the problems"});
        continue;
      }
    } else {
      c.level = level_of_folder(path.parent_path());
      if (c.level) run_folder = path.parent_path().parent_path();
      for (const auto& p : problems) {
        if (p.name == stem && (!c.level || p.level == c.level)) problem = &p;
      }
      if (!problem) {
        out.unmatched.push_back(
            {path,
             "matches no problem: expected level_<L>_problem_<P>_sample_<S>_kernel.py or "
             "a file named like a problem (e.g. level1/19_ReLU.py)"});
        continue;
      }
      c.problem_id = problem->id;
      c.sample = 0;
    }
    std::error_code ec;
    auto run = fs::relative(run_folder, root, ec).string();
    c.run = (ec || run.empty() || run == ".") ? root.filename().string() : run;
    c.problem_name = problem->name;
    out.tasks.push_back({*problem, std::move(c)});
  }
  return out;
}

}  // namespace kbv::schedule
