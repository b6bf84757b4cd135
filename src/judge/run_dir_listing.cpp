#include "judge/run_dir_listing.hpp"

#include <fmt/format.h>

namespace kbv::judge {
namespace fs = std::filesystem;

RunDirListing list_run_dir(const fs::path& run_dir, bool* complete) {
  RunDirListing out;
  bool read = true;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    out[it->path().filename().string()] = {0, {}};
  }
  if (ec) read = false;
  for (const char* sub : {"inputs", "state", "golden"}) {
    ec.clear();
    fs::directory_iterator it(run_dir / sub, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) read = false;  // absent: nothing kept
    for (fs::directory_iterator end; !ec && it != end; it.increment(ec)) {
      std::error_code size_ec, time_ec;
      out[fmt::format("{}/{}", sub, it->path().filename().string())] = {
          it->file_size(size_ec), it->last_write_time(time_ec)};
      if (size_ec || time_ec) read = false;
    }
    if (ec && ec != std::errc::no_such_file_or_directory) read = false;
  }
  if (complete && !read) *complete = false;
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
