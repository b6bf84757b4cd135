#include "judge/run_dir_listing.hpp"

#include <fmt/format.h>

namespace kbv::judge {
namespace fs = std::filesystem;

RunDirListing list_run_dir(const fs::path& run_dir) {
  RunDirListing out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    out[entry.path().filename().string()] = {0, {}};
  }
  for (const char* sub : {"inputs", "state", "golden"}) {
    for (const auto& entry : fs::directory_iterator(run_dir / sub, ec)) {
      out[fmt::format("{}/{}", sub, entry.path().filename().string())] = {
          entry.file_size(ec), entry.last_write_time(ec)};
    }
  }
  // The workers' logs grow while they run.
  out.erase("reference.log");
  out.erase("candidate.log");
  return out;
}

std::vector<std::string> changed_entries(const RunDirListing& before, const RunDirListing& after) {
  std::vector<std::string> changed;
  for (const auto& [name, info] : after) {
    auto it = before.find(name);
    if (it == before.end() || it->second != info) changed.push_back(name);
  }
  for (const auto& [name, info] : before) {
    if (!after.contains(name)) changed.push_back(name);
  }
  return changed;
}

}  // namespace kbv::judge
