// OUT/generations.jsonl: one JSON row per finished request, appended and flushed as each
// finishes, so that a killed run loses at most the requests in flight and a rerun asks only for
// what is missing. A row whose outcome is `request_failed` (the provider never answered usably)
// does not count as done: the rerun asks again. The rows are the record of the run; the kernel
// files are written before their row, so a row always has its file (a file without a row, from a
// kill between the two, is written again).
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace kbv::generate {

struct SampleKey {
  int level = 0, problem_id = 0, sample = 0;
  auto operator<=>(const SampleKey&) const = default;
};

// Outcomes that end a sample (code_block.hpp's, as strings); anything else is tried again.
bool is_final_outcome(std::string_view outcome);

struct LedgerState {
  std::map<SampleKey, nlohmann::json> final_rows;  // the last final row of each sample
  std::vector<nlohmann::json> rows;                // every readable row, in order
  int unreadable = 0;  // complete lines that are not a JSON object with a sample key
  // Bytes of the text up to its last newline: a last line without one is a row cut by a kill,
  // dropped (its sample was in flight) and cut from the file before anything is appended.
  size_t complete_bytes = 0;
};

LedgerState parse_ledger(std::string_view text);

SampleKey key_of(const nlohmann::json& row);

struct LedgerBusy : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Ledger {
 public:
  // Opens the file for appending under an exclusive lock (LedgerBusy when another process holds
  // it), then reads it, cutting a partial last line.
  explicit Ledger(std::filesystem::path path);
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  const LedgerState& state() const { return state_; }
  bool done(const SampleKey& key) const;
  // One line, written with one write(2) on an O_APPEND descriptor and synced: rows from
  // concurrent requests never interleave and a row written is a row kept.
  void append(const nlohmann::json& row);

 private:
  std::filesystem::path path_;
  LedgerState state_;
  int fd_ = -1;
  mutable std::mutex mutex_;
};

}  // namespace kbv::generate
