#include "schedule/audit.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/hash.hpp"
#include "schedule/discovery.hpp"

namespace kbv::schedule {
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

fs::path write_self_candidates(const fs::path& problems, const fs::path& folder) {
  for (const auto& problem : find_problems(problems)) {
    // A suite's own tooling beside its problems (KernelBench's src/ and scripts/) is neither in
    // a level folder nor numbered: not a problem to audit.
    if (!problem.level && !problem.id) continue;
    const fs::path target = folder / "reference" /
                            (problem.level ? fmt::format("level{}", *problem.level) : "level0") /
                            problem.path.filename();
    // The problem's own file, with its Model as the candidate's ModelNew: the same code runs in
    // the candidate's sandboxed worker as in the reference's.
    const std::string text = read_file(problem.path) +
                             "\n\n# kbv audit: the reference evaluated as its own candidate\n"
                             "ModelNew = Model\n";
    if (fs::exists(target) && read_file(target) == text) continue;
    fs::create_directories(target.parent_path());
    std::ofstream(target, std::ios::binary) << text;
  }
  return folder;
}

SuiteSummary run_audit(SuiteRequest request) {
  request.settings.settings.audit = true;
  request.interleave_levels = true;
  request.candidates = write_self_candidates(
      request.problems, request.settings.placement.cache_dir / "audit-candidates" /
                            sha256_hex(fs::absolute(request.problems).string()).substr(0, 16));
  return run_suite(request);
}

}  // namespace kbv::schedule
