// The flag catalogue against docs/result.md's flag table, and Result::add_flag against the
// catalogue: a flag kbv can raise is documented with the severities it may carry, and a
// documented flag exists.
#include "core/flags.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/result.hpp"

namespace {

// id -> the severities the docs give it ("reject", "warn or reject", ...), from every table row
// under "## Flag ids" whose first cell names ids in backquotes.
std::map<std::string, std::set<std::string>> documented_flags() {
  std::ifstream in(std::string(KBV_SOURCE_DIR) + "/docs/result.md");
  EXPECT_TRUE(in) << "docs/result.md not found";
  std::map<std::string, std::set<std::string>> out;
  std::string line;
  bool in_table = false;
  const std::regex id_pattern("`([a-z0-9_]+)`");
  const std::regex severity_pattern("reject|warn|info");
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) in_table = line == "## Flag ids";
    if (!in_table || !line.starts_with("| `")) continue;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    std::string cell;
    while (std::getline(row, cell, '|')) cells.push_back(cell);
    if (cells.size() < 3) continue;
    std::set<std::string> severities;
    for (std::sregex_iterator it(cells[1].begin(), cells[1].end(), severity_pattern), end;
         it != end; ++it)
      severities.insert(it->str());
    for (std::sregex_iterator it(cells[0].begin(), cells[0].end(), id_pattern), end; it != end;
         ++it)
      out[(*it)[1]] = severities;
  }
  return out;
}

std::set<std::string> catalogued_severities(const kbv::FlagInfo& info) {
  std::set<std::string> out{std::string(kbv::to_string(info.severity))};
  if (info.also) out.insert(std::string(kbv::to_string(*info.also)));
  return out;
}

TEST(FlagCatalogue, MatchesTheDocumentedTable) {
  auto documented = documented_flags();
  ASSERT_GT(documented.size(), 30u) << "the flag table of docs/result.md was not read";
  for (const auto& info : kbv::flag_catalogue()) {
    auto it = documented.find(std::string(info.id));
    ASSERT_NE(it, documented.end()) << info.id << " is catalogued but not in docs/result.md";
    EXPECT_EQ(it->second, catalogued_severities(info)) << info.id;
  }
  for (const auto& [id, severities] : documented) {
    EXPECT_NE(kbv::find_flag(id), nullptr) << id << " is documented but not catalogued";
  }
}

TEST(FlagCatalogue, IdsAreUnique) {
  std::set<std::string_view> seen;
  for (const auto& info : kbv::flag_catalogue()) {
    EXPECT_TRUE(seen.insert(info.id).second) << info.id;
    EXPECT_FALSE(info.meaning.empty()) << info.id;
  }
}

TEST(FlagCatalogue, AddFlagRefusesUnknownIdsAndSeverities) {
  kbv::Result result;
  result.add_flag("inputs_mutated", kbv::Severity::Reject, "evidence");
  EXPECT_TRUE(result.has_flag("inputs_mutated"));
  result.add_flag("background_thread", kbv::Severity::Warn, "a thread");  // reject or warn
  EXPECT_THROW(result.add_flag("made_up_flag", kbv::Severity::Warn, ""), std::logic_error);
  EXPECT_THROW(result.add_flag("inputs_mutated", kbv::Severity::Info, ""), std::logic_error);
  EXPECT_EQ(result.flags.size(), 2u);
}

}  // namespace
