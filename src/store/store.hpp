// The run database: one SQLite file, one row per evaluated (problem, candidate, settings),
// written in its own transaction as soon as the evaluation finishes, so an interrupted run
// (Ctrl-C, kill -9) leaves only whole rows and a rerun skips exactly what is done.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kbv::store {

// The layout of the database (its `results` and `meta` tables), kept in meta's schema_version.
// The `device_alone` table (Store::remember_device_alone) came later without a new version: a
// kbv that does not know it ignores it, and what it holds is a hint, never a result.
inline constexpr int kSchemaVersion = 1;

// Where a row came from: what the suite layout said about the candidate.
struct RowInfo {
  std::string key;  // content key of (problem, candidate, settings); see run_key()
  std::string run;  // the run or model folder the candidate came from
  std::string problem_name;
  std::optional<int> level, problem_id, sample;
};

class Store {
 public:
  // Opens (creating when absent) the database; throws std::runtime_error naming the file.
  explicit Store(const std::filesystem::path& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  bool has(const std::string& key) const;
  // The stored result under `key` (the full JSON of `kbv eval`), if any.
  std::optional<nlohmann::json> get(const std::string& key) const;
  void put(const RowInfo& info, const nlohmann::json& result);
  // As put, keeping the time the row was first written elsewhere (a row ingested from another
  // machine's database keeps its own finish time, as kbv merge copies it).
  void put(const RowInfo& info, const nlohmann::json& result, const std::string& finished_at);
  // When the row under `key` was written ("YYYY-MM-DDTHH:MM:SSZ"), if there is one.
  std::optional<std::string> finished_at(const std::string& key) const;
  // Every stored result (the full JSON of `kbv eval`), with its row info under "_row".
  std::vector<nlohmann::json> results() const;
  int count() const;

  // Problems a run found needing a device's memory to itself before their first draw (kbv run
  // evaluates their tasks after the others, TaskPicker::postpone). Remembered so that a rerun
  // over the same database orders them last from its start instead of loading each again to
  // learn it (an H100 audit resumed with 21 such problems open spent its first 100 s so,
  // session 28). `device_bytes`: the device's size then; `working_bytes`: what one evaluation
  // was to hold before its first draw. Once per (problem, device size).
  void remember_device_alone(const std::string& problem_sha256, double device_bytes,
                             double working_bytes);
  // Every problem (by its content hash) remembered so, with the largest device it needed alone.
  std::map<std::string, double> problems_needing_device_alone() const;

 private:
  void exec(const char* sql) const;
  mutable std::mutex mutex_;  // one connection, shared by the per-device evaluation threads
  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

// The key a result is stored under: SHA-256 over the problem's and candidate's content hashes
// and every setting that changes the outcome.
std::string run_key(const std::string& problem_sha256, const std::string& candidate_sha256,
                    const nlohmann::json& settings);

}  // namespace kbv::store
