#include "store/merge.hpp"

#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>

#include "store/statement.hpp"
#include "store/store.hpp"

namespace kbv::store {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<long long> as_number(const std::string& part) {
  long long value = 0;
  auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
  if (part.empty() || error != std::errc() || end != part.data() + part.size()) return {};
  return value;
}

std::vector<std::string> dotted_parts(const std::string& version) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const auto dot = version.find('.', start);
    parts.push_back(version.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

std::string kbv_version_of(const json& result) {
  return result.is_object() ? result.value("kbv_version", std::string()) : std::string();
}

int protocol_version_of(const json& result) {
  if (!result.is_object()) return 0;
  const auto it = result.find("protocol");
  if (it == result.end() || !it->is_object()) return 0;
  const auto v = it->find("version");
  return v != it->end() && v->is_number_integer() ? v->get<int>() : 0;
}

// An open SQLite connection that closes itself.
struct Connection {
  sqlite3* db = nullptr;
  ~Connection() { sqlite3_close(db); }
};

void exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string why = error ? error : sqlite3_errmsg(db);
    sqlite3_free(error);
    throw std::runtime_error(fmt::format("sqlite: {}", why));
  }
}

// Opens an input for queries only (a merge never changes an input) and checks it is a kbv
// database of this schema. Opened read-write where it may be, all the same: a read-only
// connection to a WAL database leaves its -wal and -shm files behind, the last read-write one
// to close removes them, as `kbv run` does.
void open_input(const fs::path& path, Connection& c) {
  if (!fs::exists(path)) throw MergeError(fmt::format("{} does not exist", path.string()));
  if (!fs::is_regular_file(path)) throw MergeError(fmt::format("{} is not a file", path.string()));
  const int mode = ::access(path.c_str(), W_OK) == 0 ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
  if (sqlite3_open_v2(path.c_str(), &c.db, mode, nullptr) != SQLITE_OK) {
    throw MergeError(fmt::format("cannot open {}: {}", path.string(),
                                 c.db ? sqlite3_errmsg(c.db) : "out of memory"));
  }
  sqlite3_busy_timeout(c.db, 10000);
  std::string version;
  try {
    exec(c.db, "PRAGMA query_only = 1");
    Statement q(c.db, "SELECT value FROM meta WHERE key = 'schema_version'");
    if (q.step()) version = q.text(0);
    Statement(c.db, "SELECT key, result_json, finished_at FROM results LIMIT 0").step();
  } catch (const std::runtime_error& error) {
    throw MergeError(
        fmt::format("{} is not a kbv result database ({})", path.string(), error.what()));
  }
  if (version != std::to_string(kSchemaVersion)) {
    throw MergeError(fmt::format("{} has schema version '{}'; this kbv merges version {}",
                                 path.string(), version, kSchemaVersion));
  }
}

bool has_table(sqlite3* db, const char* name) {
  Statement q(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  q.bind(1, std::string(name));
  return q.step();
}

std::vector<std::string> result_columns(sqlite3* db) {
  std::vector<std::string> columns;
  Statement q(db, "SELECT name FROM pragma_table_info('results') ORDER BY cid");
  while (q.step()) columns.push_back(q.text(0));
  return columns;
}

// The temporary output: removed (with SQLite's side files) unless the merge got to the rename.
class TemporaryOutput {
 public:
  explicit TemporaryOutput(const fs::path& output)
      : path_(output.parent_path() /
              fmt::format(".{}.merge-{}.tmp", output.filename().string(), ::getpid())) {
    remove();
  }
  ~TemporaryOutput() {
    if (!renamed_) remove();
  }
  const fs::path& path() const { return path_; }
  void rename_to(const fs::path& output) {
    fs::rename(path_, output);
    renamed_ = true;
  }

 private:
  void remove() const {
    std::error_code ec;
    for (const char* side : {"", "-wal", "-shm", "-journal"}) {
      fs::remove(fs::path(path_.string() + side), ec);
    }
  }
  fs::path path_;
  bool renamed_ = false;
};

}  // namespace

int compare_versions(const std::string& a, const std::string& b) {
  const auto pa = dotted_parts(a), pb = dotted_parts(b);
  for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
    const std::string x = i < pa.size() ? pa[i] : "0", y = i < pb.size() ? pb[i] : "0";
    const auto nx = as_number(x), ny = as_number(y);
    const int order = nx && ny ? (*nx < *ny ? -1 : *nx > *ny ? 1 : 0) : x.compare(y);
    if (order != 0) return order < 0 ? -1 : 1;
  }
  return 0;
}

Preference prefer(const StoredResult& kept, const StoredResult& incoming) {
  const auto kept_kbv = kbv_version_of(kept.result), new_kbv = kbv_version_of(incoming.result);
  if (const int order = compare_versions(new_kbv, kept_kbv); order != 0) {
    return {order > 0, fmt::format("kbv {} is later than kbv {}", order > 0 ? new_kbv : kept_kbv,
                                   order > 0 ? kept_kbv : new_kbv)};
  }
  const int kept_protocol = protocol_version_of(kept.result);
  const int new_protocol = protocol_version_of(incoming.result);
  if (new_protocol != kept_protocol) {
    const bool later = new_protocol > kept_protocol;
    return {later, fmt::format("protocol version {} is later than {}",
                               later ? new_protocol : kept_protocol,
                               later ? kept_protocol : new_protocol)};
  }
  if (incoming.finished_at != kept.finished_at) {
    const bool later = incoming.finished_at > kept.finished_at;
    return {later, fmt::format("same kbv and protocol; finished at {}, later than {}",
                               later ? incoming.finished_at : kept.finished_at,
                               later ? kept.finished_at : incoming.finished_at)};
  }
  return {false, "same kbv, protocol and finish time: the earlier input's kept"};
}

MergeSummary merge_databases(const std::vector<fs::path>& inputs, const fs::path& output) {
  if (inputs.empty()) throw MergeError("nothing to merge: name at least one database");
  // Every input checked before anything is written.
  std::vector<std::unique_ptr<Connection>> sources;
  for (const auto& input : inputs) {
    std::error_code ec;
    if (fs::exists(output) && fs::equivalent(input, output, ec)) {
      throw MergeError(fmt::format(
          "-o {} is also an input: name a new file (an input is only read, and the output "
          "replaces its file at the end)",
          output.string()));
    }
    sources.push_back(std::make_unique<Connection>());
    open_input(input, *sources.back());
  }

  TemporaryOutput temporary(output);
  { Store create_schema(temporary.path()); }  // the store's own tables and schema version
  Connection out;
  if (sqlite3_open(temporary.path().c_str(), &out.db) != SQLITE_OK) {
    throw std::runtime_error(fmt::format("cannot create {}: {}", temporary.path().string(),
                                         out.db ? sqlite3_errmsg(out.db) : "out of memory"));
  }
  exec(out.db, "BEGIN");
  const auto columns = result_columns(out.db);
  std::string names, marks;
  for (const auto& c : columns) {
    names += (names.empty() ? "" : ", ") + c;
    marks += marks.empty() ? "?" : ", ?";
  }
  const auto column = [&](const std::string& name) {
    return static_cast<int>(std::find(columns.begin(), columns.end(), name) - columns.begin());
  };
  const int key_at = column("key"), json_at = column("result_json");
  const int finished_at = column("finished_at"), run_at = column("run");
  const int problem_at = column("problem"), sample_at = column("sample");

  MergeSummary summary;
  std::map<std::string, size_t> origin;  // key -> the input its kept row came from
  {  // the statements end before the connection closes: sqlite3_close fails while any is open
    Statement find(out.db, "SELECT result_json, finished_at FROM results WHERE key = ?");
    Statement put(
        out.db,
        fmt::format("INSERT OR REPLACE INTO results ({}) VALUES ({})", names, marks).c_str());
    Statement meta_get(out.db, "SELECT value FROM meta WHERE key = ?");
    Statement meta_put(out.db, "INSERT INTO meta (key, value) VALUES (?, ?)");
    Statement alone_put(out.db,
                        "INSERT OR IGNORE INTO device_alone (problem_sha256, device_bytes, "
                        "working_bytes, recorded_at) VALUES (?, ?, ?, ?)");
    for (size_t i = 0; i < inputs.size(); ++i) {
      sqlite3* in = sources[i]->db;
      // Meta: the union, the first input's value where they differ (schema_version is equal:
      // checked above).
      Statement meta(in, "SELECT key, value FROM meta ORDER BY key");
      while (meta.step()) {
        meta_get.reset();
        meta_get.bind(1, meta.text(0));
        if (!meta_get.step()) {
          meta_put.reset();
          meta_put.bind(1, meta.text(0));
          meta_put.bind(2, meta.text(1));
          meta_put.step();
        } else if (meta_get.text(0) != meta.text(1)) {
          summary.meta_clashes.push_back(fmt::format("{}: kept '{}', {} has '{}'", meta.text(0),
                                                     meta_get.text(0), inputs[i].string(),
                                                     meta.text(1)));
        }
      }
      Statement rows(in, fmt::format("SELECT {} FROM results ORDER BY key", names).c_str());
      while (rows.step()) {
        ++summary.read;
        const std::string key = rows.text(key_at);
        find.reset();
        find.bind(1, key);
        if (find.step()) {
          if (find.text(0) == rows.text(json_at)) {
            ++summary.duplicates;
            continue;
          }
          const auto choice =
              prefer({json::parse(find.text(0), nullptr, false), find.text(1)},
                     {json::parse(rows.text(json_at), nullptr, false), rows.text(finished_at)});
          const auto sample = rows.integer_or_null(sample_at);
          summary.conflicts.push_back(
              {key, rows.text(run_at), rows.text(problem_at),
               sample.is_null() ? std::nullopt : std::optional<int>(sample.get<int>()),
               choice.incoming ? inputs[i] : inputs[origin.at(key)],
               choice.incoming ? inputs[origin.at(key)] : inputs[i], choice.why});
          if (!choice.incoming) continue;
        }
        put.reset();
        for (size_t c = 0; c < columns.size(); ++c) {
          put.bind_value(static_cast<int>(c) + 1, rows.value(static_cast<int>(c)));
        }
        put.step();
        origin[key] = i;
      }
      // The problems a shard found needing a device's memory to itself: a rerun over the merged
      // database orders them last from its start too (suite.cpp, postpone_remembered). A
      // database written before the table existed has none.
      if (has_table(in, "device_alone")) {
        Statement alone(in,
                        "SELECT problem_sha256, device_bytes, working_bytes, recorded_at "
                        "FROM device_alone");
        while (alone.step()) {
          alone_put.reset();
          for (int c = 0; c < 4; ++c) alone_put.bind_value(c + 1, alone.value(c));
          alone_put.step();
          summary.device_alone += sqlite3_changes(out.db);
        }
      }
    }
    find.reset();
    meta_get.reset();
    exec(out.db, "COMMIT");
  }
  summary.rows = static_cast<int>(origin.size());
  // Closing checkpoints the WAL into the file, which is then whole on its own for the rename.
  if (sqlite3_close(out.db) != SQLITE_OK) {
    throw std::runtime_error(
        fmt::format("cannot close {}: {}", temporary.path().string(), sqlite3_errmsg(out.db)));
  }
  out.db = nullptr;
  temporary.rename_to(output);
  return summary;
}

}  // namespace kbv::store
