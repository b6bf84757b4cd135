// `kbv merge A.sqlite B.sqlite ... -o all.sqlite`: the run databases of several machines (the
// shards of `kbv run --shard I/N`) as one. Rows are keyed by their content key (run_key), so
// merging is idempotent: overlapping inputs, the same input twice or a merged file merged again
// add nothing twice. The output is written to a temporary file renamed at the end: a failed
// merge leaves the output as it was, and inputs are only queried.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kbv::store {

// An input that cannot be merged (missing, not a kbv database, of another schema) or an output
// that names an input: the user's to fix, nothing was written.
class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One stored result under a key: the full result JSON and when its row was written.
struct StoredResult {
  nlohmann::json result;
  std::string finished_at;  // "YYYY-MM-DDTHH:MM:SSZ": compares as text
};

struct Preference {
  bool incoming = false;  // true: the incoming result replaces the kept one
  std::string why;
};

// Which of two different results under one key a merge keeps: the one of the later kbv
// (kbv_version, compared part by part as numbers), then of the later protocol version, then the
// one finished later; on a full tie the one already kept (the earlier input on the command line).
Preference prefer(const StoredResult& kept, const StoredResult& incoming);

// <0, 0, >0 as `a` is an earlier, the same or a later version than `b` ("0.9.2" < "0.10.0");
// parts that are not numbers compare as text.
int compare_versions(const std::string& a, const std::string& b);

struct MergeConflict {
  std::string key, run, problem;
  std::optional<int> sample;
  std::filesystem::path kept_from, dropped_from;
  std::string why;
};

struct MergeSummary {
  int rows = 0;        // in the output
  int read = 0;        // rows read from every input
  int duplicates = 0;  // rows already in the output with the same result
  std::vector<MergeConflict> conflicts;
  std::vector<std::string> meta_clashes;  // meta keys the inputs disagree on (the first kept)
  int device_alone = 0;  // problems needing a device's memory to itself, as rows in the output
};

// Merges `inputs` into a new `output` (replacing it when it exists). Throws MergeError before
// writing anything when an input is missing or no kbv database, or when `output` is an input.
MergeSummary merge_databases(const std::vector<std::filesystem::path>& inputs,
                             const std::filesystem::path& output);

}  // namespace kbv::store
