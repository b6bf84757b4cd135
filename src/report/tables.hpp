// Internal to src/report: the tables the Markdown and HTML renderings share (markdown.cpp,
// html.cpp, run_comparison.cpp), built once as text cells and written out in either form, and
// the HTML page shell both pages (`kbv report`, `kbv compare`) are written in.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/metrics.hpp"
#include "report/render.hpp"

namespace kbv::report::tables {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct LabelledFigures {
  std::string key;
  const Figures* figures;
};

std::string na();                       // "n/a"
std::string percent(int num, int den);  // "83.3% (5/6)", n/a when den == 0
// Figures with significant digits (kbv::significant), never a fixed number of decimals.
std::string estimate(const Estimate& e);              // "1.00 [0.800, 1.25]", "0.000588 [...]"
std::string number(const std::optional<double>& v);   // 3 significant digits: "0.000588", "19.2"
std::string compact(const std::optional<double>& v);  // 4, zeros trimmed: "13", "0.6667"
std::string counts(const std::map<std::string, int>& m);  // "a: 1, b: 2"

// The section's groups (by run or level) then the overall row; best: their best-of-N figures.
std::vector<LabelledFigures> rows_of(const Section& s, GroupBy by, bool best);
Table correctness(const std::vector<LabelledFigures>& rows, const std::string& first);
Table speed(const std::vector<LabelledFigures>& rows, const std::string& first, bool tf32,
            const std::vector<double>& fast_p);
Table memory(const std::vector<LabelledFigures>& rows, const std::string& first, double band);
Table protocols(const ProtocolComparison& pc);
Table disagreement(const ProtocolComparison& pc);
// The flagged problems with their own figures: one row per problem and protocol.
Table flagged(const Report& r);
// Under that table: "N problems flagged degenerate or with a reference failing its float64 run
// are left out of the aggregates above; --include-flagged puts them back." (or, with it, that
// they are in); "" when none is flagged. `where` qualifies the problems ("in either database").
std::string flagged_note(size_t problems, bool included, std::string_view where = "");
// The same said before the tables (they come first): "... are left out of every figure; their
// own figures are under Flagged problems."
std::string flagged_headline(size_t problems, bool included, std::string_view where = "");
// "problem_degenerate, reference_fails_float64"
std::string joined(const std::vector<std::string>& ids);
// The harness errors kbv report lists under its tables (in none of them): where, kind, reason.
Table harness_errors(const std::vector<HarnessErrorRow>& rows);
// "N harness errors (faults of kbv, not verdicts) are left out of every figure: listed below."
std::string harness_errors_note(const std::vector<HarnessErrorRow>& rows);

std::string markdown(const Table& t);
std::string html(const Table& t);
std::string csv_field(const std::string& s);
std::string group_name(GroupBy by);  // "run" or "level"

// A self-contained HTML page: doctype, head (the title, the table style every page shares and
// then `extra_css`, rules ending in a newline, may be empty), then `body` and the closing tags.
std::string html_page(std::string_view title, std::string_view extra_css, std::string_view body);

}  // namespace kbv::report::tables
