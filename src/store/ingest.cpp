#include "store/ingest.hpp"

#include <fmt/format.h>

#include "store/merge.hpp"

namespace kbv::store {
using nlohmann::json;

namespace {

std::optional<int> optional_int(const json& row, const char* name) {
  const auto it = row.find(name);
  if (it == row.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

std::string text(const json& row, const char* name) {
  const auto it = row.find(name);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Ingested ingest_row(Store& db, const json& exported, bool evaluated_again) {
  if (!exported.is_object() || !exported.contains("_row") || !exported["_row"].is_object()) {
    throw IngestError("a row to ingest is a result with its row info under \"_row\"");
  }
  const json& row = exported["_row"];
  RowInfo info{text(row, "key"),
               text(row, "run"),
               text(row, "problem"),
               optional_int(row, "level"),
               optional_int(row, "problem_id"),
               optional_int(row, "sample")};
  if (info.key.empty()) throw IngestError("a row to ingest has no key");
  std::string finished = text(row, "finished_at");
  json result = exported;
  result.erase("_row");

  Ingested done;
  if (const auto stored = db.get(info.key)) {
    if (*stored == result) return {Ingested::Outcome::Duplicate, ""};
    if (evaluated_again) {
      done = {Ingested::Outcome::Replaced, "evaluated again: the new result replaces the stored"};
    } else {
      const auto choice =
          prefer({*stored, db.finished_at(info.key).value_or("")}, {result, finished});
      done = {choice.incoming ? Ingested::Outcome::Replaced : Ingested::Outcome::KeptStored,
              choice.why};
      if (!choice.incoming) return done;
    }
  }
  if (finished.empty()) {
    db.put(info, result);  // a row without its time is stamped now, as a fresh result is
  } else {
    db.put(info, result, finished);
  }
  return done;
}

}  // namespace kbv::store
