// `kbv report --format csv`: one row per group and variant, every figure a column. Flagged problems
// have rows of their own (group_by `flagged_problem`); the last column says how many flagged
// problems a row's figures leave out.
#include <fmt/format.h>

#include <set>

#include "report/formats.hpp"
#include "report/tables.hpp"

namespace kbv::report {

using tables::csv_field;

std::string csv_report(const Report& r) {
  struct Row {
    std::string protocol, by, key, variant;
    const Figures* f;
    int flagged_left_out;
  };
  std::vector<Row> rows;
  const auto add = [&](const std::string& protocol, const char* by, const Group& g) {
    rows.push_back({protocol, by, g.key, "all", &g.figures, g.flagged_left_out});
    if (g.best_of_n) {
      rows.push_back({protocol, by, g.key, "best_of_n", &*g.best_of_n, g.flagged_left_out});
    }
  };
  for (const auto& s : r.sections) {
    for (const auto& g : s.by_run) add(s.protocol, "run", g);
    for (const auto& g : s.by_level) add(s.protocol, "level", g);
    add(s.protocol, "overall", s.overall);
    for (const auto& g : s.flagged) add(s.protocol, "flagged_problem", g);
  }
  std::set<std::string> families, flags;
  for (const auto& row : rows) {
    for (const auto& [k, v] : row.f->first_failing_family) families.insert(k);
    for (const auto& [k, v] : row.f->reject_flags) flags.insert(k);
  }
  // Every group of a report has the same figures; with no group, the columns of an empty one.
  Figures empty;
  for (double p : r.options.fast_p) empty.vs_tf32.fast.emplace_back(p, 0);
  empty.vs_fp32.fast = empty.vs_tf32.fast;
  std::string out = "protocol,group_by,group,variant";
  for (const auto& [name, v] : scalars(rows.empty() ? empty : *rows.front().f)) out += "," + name;
  for (const auto& fam : families) out += "," + csv_field("first_failing:" + fam);
  for (const auto& id : flags) out += "," + csv_field("rejected:" + id);
  out += ",flagged_problems_left_out\n";
  for (const auto& row : rows) {
    out += fmt::format("{},{},{},{}", csv_field(row.protocol), row.by, csv_field(row.key),
                       row.variant);
    for (const auto& [name, v] : scalars(*row.f)) out += "," + (v ? fmt::format("{:g}", *v) : "");
    for (const auto& fam : families) {
      auto it = row.f->first_failing_family.find(fam);
      out += "," + std::to_string(it == row.f->first_failing_family.end() ? 0 : it->second);
    }
    for (const auto& id : flags) {
      auto it = row.f->reject_flags.find(id);
      out += "," + std::to_string(it == row.f->reject_flags.end() ? 0 : it->second);
    }
    out += fmt::format(",{}\n", row.flagged_left_out);
  }
  return out;
}

}  // namespace kbv::report
