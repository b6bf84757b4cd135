// A prepared SQLite statement that finalizes itself, for the store and the merge of stores.
#pragma once

#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace kbv::store {

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("sqlite: ") + sqlite3_errmsg(db));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  void bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void bind(int i, std::optional<int> v) {
    v ? sqlite3_bind_int(stmt_, i, *v) : sqlite3_bind_null(stmt_, i);
  }
  void bind_number(int i, const nlohmann::json& v) {
    v.is_number() ? sqlite3_bind_double(stmt_, i, v.get<double>()) : sqlite3_bind_null(stmt_, i);
  }
  // A column of another statement's row, copied with its type (the merge copies rows as they
  // are).
  void bind_value(int i, sqlite3_value* v) { sqlite3_bind_value(stmt_, i, v); }
  sqlite3_value* value(int column) const { return sqlite3_column_value(stmt_, column); }
  // For the next row of a statement run again: its bindings cleared.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw std::runtime_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
  }
  std::string text(int column) const {
    auto* p = sqlite3_column_text(stmt_, column);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }
  nlohmann::json integer_or_null(int column) const {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL
               ? nlohmann::json(nullptr)
               : nlohmann::json(sqlite3_column_int(stmt_, column));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace kbv::store
