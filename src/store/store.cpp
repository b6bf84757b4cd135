#include "store/store.hpp"

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>

#include "core/hash.hpp"
#include "store/statement.hpp"

namespace kbv::store {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
  key TEXT PRIMARY KEY,
  run TEXT NOT NULL,
  problem TEXT NOT NULL,
  level INTEGER,
  problem_id INTEGER,
  sample INTEGER,
  problem_sha256 TEXT NOT NULL,
  candidate_path TEXT NOT NULL,
  candidate_sha256 TEXT NOT NULL,
  protocol TEXT NOT NULL,
  device TEXT NOT NULL,
  verdict TEXT NOT NULL,
  reason TEXT NOT NULL,
  speedup_vs_tf32 REAL,
  speedup_vs_fp32 REAL,
  peak_ratio REAL,
  result_json TEXT NOT NULL,
  finished_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_by_run ON results (run, level, problem_id, sample);
CREATE TABLE IF NOT EXISTS device_alone (
  problem_sha256 TEXT NOT NULL,
  device_bytes REAL NOT NULL,
  working_bytes REAL NOT NULL,
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (problem_sha256, device_bytes)
);
)sql";

std::string now_utc() {
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

nlohmann::json speedup_value(const nlohmann::json& result, const char* which) {
  const auto& s = result.value("speedup", nlohmann::json::object());
  if (!s.contains(which) || !s[which].is_object()) return nullptr;
  return s[which].value("value", nlohmann::json());
}

}  // namespace

Store::Store(const std::filesystem::path& path) : path_(path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error(fmt::format("cannot open the database {}: {}", path.string(), why));
  }
  sqlite3_busy_timeout(db_, 10000);
  // WAL: readers (kbv report, kbv export) never block the writer, and a killed writer leaves
  // the last committed rows intact.
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=NORMAL");
  exec(kSchema);
  Statement version(db_, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (version.step()) {
    if (std::stoi(version.text(0)) != kSchemaVersion) {
      throw std::runtime_error(fmt::format("{} has schema version {}, this kbv writes {}",
                                           path.string(), version.text(0), kSchemaVersion));
    }
  } else {
    exec(fmt::format("INSERT INTO meta VALUES ('schema_version', '{}')", kSchemaVersion).c_str());
  }
}

Store::~Store() { sqlite3_close(db_); }

void Store::exec(const char* sql) const {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string why = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(fmt::format("sqlite ({}): {}", path_.string(), why));
  }
}

bool Store::has(const std::string& key) const {
  std::lock_guard lock(mutex_);
  Statement q(db_, "SELECT 1 FROM results WHERE key = ?");
  q.bind(1, key);
  return q.step();
}

std::optional<nlohmann::json> Store::get(const std::string& key) const {
  std::lock_guard lock(mutex_);
  Statement q(db_, "SELECT result_json FROM results WHERE key = ?");
  q.bind(1, key);
  if (!q.step()) return std::nullopt;
  return nlohmann::json::parse(q.text(0));
}

namespace {
// A member of a result object, or an empty object: rows are written even from partial results.
const nlohmann::json& part(const nlohmann::json& r, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  auto it = r.find(key);
  return it != r.end() && it->is_object() ? *it : empty;
}
}  // namespace

void Store::put(const RowInfo& info, const nlohmann::json& r) { put(info, r, now_utc()); }

std::optional<std::string> Store::finished_at(const std::string& key) const {
  std::lock_guard lock(mutex_);
  Statement q(db_, "SELECT finished_at FROM results WHERE key = ?");
  q.bind(1, key);
  if (!q.step()) return std::nullopt;
  return q.text(0);
}

void Store::put(const RowInfo& info, const nlohmann::json& r, const std::string& finished_at) {
  std::lock_guard lock(mutex_);
  Statement q(db_,
              "INSERT OR REPLACE INTO results (key, run, problem, level, problem_id, sample, "
              "problem_sha256, candidate_path, candidate_sha256, protocol, device, verdict, "
              "reason, speedup_vs_tf32, speedup_vs_fp32, peak_ratio, result_json, finished_at) "
              "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  q.bind(1, info.key);
  q.bind(2, info.run);
  q.bind(3, info.problem_name);
  q.bind(4, info.level);
  q.bind(5, info.problem_id);
  q.bind(6, info.sample);
  q.bind(7, part(r, "problem").value("sha256", std::string()));
  q.bind(8, part(r, "candidate").value("path", std::string()));
  q.bind(9, part(r, "candidate").value("sha256", std::string()));
  q.bind(10, part(r, "protocol").value("name", std::string()));
  q.bind(11, part(r, "environment").value("device", std::string()));
  q.bind(12, r.value("verdict", std::string("unknown")));
  q.bind(13, r.value("reason", std::string()));
  q.bind_number(14, speedup_value(r, "vs_tf32"));
  q.bind_number(15, speedup_value(r, "vs_fp32"));
  q.bind_number(16, r.value("memory", nlohmann::json()).is_object()
                        ? r["memory"].value("peak_ratio", nlohmann::json())
                        : nlohmann::json());
  // Invalid UTF-8 (bytes a candidate planted in a message) is replaced, never a throw that
  // would lose the row.
  q.bind(17, r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  q.bind(18, finished_at);
  q.step();  // a single statement is its own transaction: the row lands whole or not at all
}

std::vector<nlohmann::json> Store::results() const {
  std::lock_guard lock(mutex_);
  Statement q(db_,
              "SELECT result_json, run, problem, level, problem_id, sample, key, finished_at "
              "FROM results ORDER BY run, level, problem_id, problem, sample");
  std::vector<nlohmann::json> out;
  while (q.step()) {
    auto r = nlohmann::json::parse(q.text(0));
    r["_row"] = {{"run", q.text(1)},
                 {"problem", q.text(2)},
                 {"level", q.integer_or_null(3)},
                 {"problem_id", q.integer_or_null(4)},
                 {"sample", q.integer_or_null(5)},
                 {"key", q.text(6)},
                 {"finished_at", q.text(7)}};
    out.push_back(std::move(r));
  }
  return out;
}

int Store::count() const {
  std::lock_guard lock(mutex_);
  Statement q(db_, "SELECT COUNT(*) FROM results");
  q.step();
  return std::stoi(q.text(0));
}

void Store::remember_device_alone(const std::string& problem_sha256, double device_bytes,
                                  double working_bytes) {
  std::lock_guard lock(mutex_);
  Statement q(db_,
              "INSERT OR REPLACE INTO device_alone (problem_sha256, device_bytes, working_bytes, "
              "recorded_at) VALUES (?,?,?,?)");
  q.bind(1, problem_sha256);
  q.bind_number(2, device_bytes);
  q.bind_number(3, working_bytes);
  q.bind(4, now_utc());
  q.step();
}

std::map<std::string, double> Store::problems_needing_device_alone() const {
  std::lock_guard lock(mutex_);
  Statement q(db_,
              "SELECT problem_sha256, MAX(device_bytes) FROM device_alone GROUP BY problem_sha256");
  std::map<std::string, double> out;
  while (q.step()) out[q.text(0)] = q.real(1);
  return out;
}

std::string run_key(const std::string& problem_sha256, const std::string& candidate_sha256,
                    const nlohmann::json& settings) {
  return sha256_hex(problem_sha256 + "|" + candidate_sha256 + "|" + settings.dump());
}

}  // namespace kbv::store
