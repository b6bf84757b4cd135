// E2: the run directory's inputs, states and golden outputs, once written, may be read by the
// candidate (through its links) but never changed. A listing is the size and modification time
// of each file and the top-level entries; two listings differ where the candidate reached
// behind the sandbox's read-only mounts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kbv::judge {

using RunDirListing =
    std::map<std::string, std::pair<std::uintmax_t, std::filesystem::file_time_type>>;

// `complete` (when given) is set false (never true) where the directory or an entry could not
// be read: an
// entry missing from the listing for that reason is no evidence of anything.
RunDirListing list_run_dir(const std::filesystem::path& run_dir, bool* complete = nullptr);

// The entries created, changed or removed between `before` and `after`, by name.
std::vector<std::string> changed_entries(const RunDirListing& before, const RunDirListing& after);

}  // namespace kbv::judge
