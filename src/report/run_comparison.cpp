#include "report/run_comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/figure_format.hpp"
#include "report/svg.hpp"
#include "report/tables.hpp"

namespace kbv::report {

using nlohmann::json;

namespace {

using GroupId = std::tuple<std::string, std::string, std::string, std::string>;
using TaskId = std::tuple<std::string, std::string, int, std::string, int>;

// `as_protocol`, when set, stands for every section's protocol: the name under which groups of
// two databases of different protocols are paired (Comparison::protocol_a).
std::map<GroupId, const Figures*> groups_of(const Report& r, const std::string& as_protocol) {
  std::map<GroupId, const Figures*> out;
  const auto add = [&](const std::string& protocol, const char* by, const Group& g) {
    const std::string& p = as_protocol.empty() ? protocol : as_protocol;
    out[{p, by, g.key, "all"}] = &g.figures;
    if (g.best_of_n) out[{p, by, g.key, "best_of_n"}] = &*g.best_of_n;
  };
  for (const auto& s : r.sections) {
    add(s.protocol, "overall", s.overall);
    for (const auto& g : s.by_run) add(s.protocol, "run", g);
    for (const auto& g : s.by_level) add(s.protocol, "level", g);
    for (const auto& g : s.flagged) add(s.protocol, "flagged_problem", g);
  }
  return out;
}

struct Verdict {
  std::string verdict;
  bool flagged = false;  // its problem is flagged
};

std::map<TaskId, Verdict> verdicts_of(const Report& r, const std::string& as_protocol) {
  std::map<TaskId, Verdict> out;
  for (const auto& t : r.tasks) {
    out[{as_protocol.empty() ? t.protocol : as_protocol, t.run, t.level.value_or(-1), t.problem,
         t.sample.value_or(-1)}] = {t.verdict, !t.problem_flags.empty()};
  }
  return out;
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

Comparison compare(const std::vector<json>& a, const std::vector<json>& b, const Options& options,
                   std::string label_a, std::string label_b) {
  Comparison c;
  c.label_a = std::move(label_a);
  c.label_b = std::move(label_b);
  c.options = options;
  // Both sides leave out (or keep) the same problems: those flagged in either.
  FlaggedProblems flagged = flagged_problems(a);
  for (const auto& [problem, why] : flagged_problems(b)) {
    auto& ids = flagged[problem];
    ids.insert(ids.end(), why.begin(), why.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  }
  const Report ra = build_report(a, options, flagged), rb = build_report(b, options, flagged);
  c.flagged = ra.flagged;
  c.flagged.insert(rb.flagged.begin(), rb.flagged.end());
  // One protocol on each side, and not the same (a run under `standard` against the same
  // candidates under `verified`: the paper's comparison): the groups and candidates are paired
  // across the two protocols, under the name "A-protocol vs B-protocol".
  std::string across;
  if (ra.sections.size() == 1 && rb.sections.size() == 1 &&
      ra.sections[0].protocol != rb.sections[0].protocol) {
    c.protocol_a = ra.sections[0].protocol;
    c.protocol_b = rb.sections[0].protocol;
    across = c.protocol_a + " vs " + c.protocol_b;
  }
  const auto ga = groups_of(ra, across), gb = groups_of(rb, across);
  std::map<GroupId, std::pair<const Figures*, const Figures*>> both;
  for (const auto& [id, f] : ga) both[id].first = f;
  for (const auto& [id, f] : gb) both[id].second = f;
  // Overall groups first, then by run, then by level (the map orders by protocol first).
  for (const char* by : {"overall", "run", "level", "flagged_problem"}) {
    for (const auto& [id, pair] : both) {
      const auto& [protocol, group_by, key, variant] = id;
      if (group_by != by) continue;
      GroupDiff g{protocol, group_by, key, variant, pair.first != nullptr, pair.second != nullptr,
                  {}};
      // Both reports share the options, so both sides list the same figures in one order; a
      // side without the group has them all unset.
      const auto sa = pair.first ? scalars(*pair.first) : decltype(scalars(Figures{})){};
      const auto sb = pair.second ? scalars(*pair.second) : decltype(sa){};
      const auto& names = pair.first ? sa : sb;
      for (size_t i = 0; i < names.size(); ++i) {
        FigureDiff d{names[i].first, i < sa.size() ? sa[i].second : std::nullopt,
                     i < sb.size() ? sb[i].second : std::nullopt, std::nullopt};
        if (d.a && d.b) d.diff = *d.b - *d.a;
        g.figures.push_back(std::move(d));
      }
      c.groups.push_back(std::move(g));
    }
  }
  c.harness_errors_a = ra.harness_errors;
  c.harness_errors_b = rb.harness_errors;
  const auto va = verdicts_of(ra, across), vb = verdicts_of(rb, across);
  for (const auto& [id, left] : va) {
    auto it = vb.find(id);
    if (it == vb.end()) continue;
    const Verdict& right = it->second;
    if (left.flagged || right.flagged) {
      ++c.matched_flagged;
      if (!options.include_flagged) continue;
    }
    ++c.matched;
    c.same_verdict += left.verdict == right.verdict ? 1 : 0;
    c.correct_only_in_a += left.verdict == "correct" && right.verdict != "correct" ? 1 : 0;
    c.correct_only_in_b += left.verdict != "correct" && right.verdict == "correct" ? 1 : 0;
  }
  return c;
}

json GroupDiff::to_json() const {
  json figs = json::object();
  for (const auto& f : figures) {
    figs[f.name] = {{"a", opt(f.a)}, {"b", opt(f.b)}, {"diff", opt(f.diff)}};
  }
  return {{"protocol", protocol}, {"group_by", group_by}, {"group", key},   {"variant", variant},
          {"in_a", in_a},         {"in_b", in_b},         {"figures", figs}};
}

json Comparison::to_json() const {
  json gs = json::array();
  for (const auto& g : groups) gs.push_back(g.to_json());
  json ha = json::array(), hb = json::array(), fl = json::array();
  for (const auto& [problem, why] : flagged) {
    fl.push_back({{"problem", problem}, {"why", why}, {"in_aggregates", options.include_flagged}});
  }
  for (const auto& h : harness_errors_a) ha.push_back(h.to_json());
  for (const auto& h : harness_errors_b) hb.push_back(h.to_json());
  return {{"schema", "kbv.compare/1"},
          {"a", label_a},
          {"b", label_b},
          {"protocols",
           protocol_a.empty() ? json(nullptr) : json{{"a", protocol_a}, {"b", protocol_b}}},
          {"include_flagged", options.include_flagged},
          {"flagged_problems", fl},
          {"groups", gs},
          {"harness_errors", {{"a", ha}, {"b", hb}}},
          {"candidates",
           {{"matched", matched},
            {"matched_flagged", matched_flagged},
            {"same_verdict", same_verdict},
            {"correct_only_in_a", correct_only_in_a},
            {"correct_only_in_b", correct_only_in_b}}}};
}

namespace {

using tables::Table;

Table diff_table(const Comparison& c, const GroupDiff& g) {
  Table t{{"figure", c.label_a, c.label_b, fmt::format("{} - {}", c.label_b, c.label_a)}, {}};
  for (const auto& f : g.figures) {
    const auto diff = [](double d) {
      return (d >= 0 ? "+" : "") + significant(d, 4, TrailingZeros::Trim);
    };
    t.rows.push_back({f.name, tables::compact(f.a), tables::compact(f.b),
                      f.diff ? diff(*f.diff) : tables::na()});
  }
  return t;
}

std::string title(const GroupDiff& g) {
  std::string s = g.group_by == "overall" ? "all" : fmt::format("{} {}", g.group_by, g.key);
  if (g.group_by == "level") s = g.key;
  return fmt::format("protocol {}, {}{}", g.protocol, s,
                     g.variant == "best_of_n" ? " (best of N)" : "");
}

bool shown(const GroupDiff& g, GroupBy by) {
  return g.group_by == "overall" || g.group_by == (by == GroupBy::Run ? "run" : "level");
}

std::string candidates_line(const Comparison& c) {
  const std::string same =
      c.protocol_a.empty()
          ? "same protocol, run, level, problem, sample"
          : fmt::format("same run, level, problem, sample; protocol {} in {}, {} in {}",
                        c.protocol_a, c.label_a, c.protocol_b, c.label_b);
  std::string line = fmt::format(
      "{} candidates in both ({}): {} with the same verdict, {} correct only in {}, {} correct "
      "only in {}.",
      c.matched, same, c.same_verdict, c.correct_only_in_a, c.label_a, c.correct_only_in_b,
      c.label_b);
  if (c.matched_flagged > 0 && c.options.include_flagged) {
    line +=
        fmt::format(" {} of them are of flagged problems (--include-flagged).", c.matched_flagged);
  } else if (c.matched_flagged > 0) {
    line += fmt::format(
        " {} more candidate{} in both {} of flagged problems, left out of these "
        "counts.",
        c.matched_flagged, c.matched_flagged == 1 ? "" : "s",
        c.matched_flagged == 1 ? "is" : "are");
  }
  if (!c.harness_errors_a.empty() || !c.harness_errors_b.empty()) {
    line += fmt::format(
        " Harness errors (faults of kbv, not verdicts) left out of every figure and match: {} in "
        "{}, {} in {}.",
        c.harness_errors_a.size(), c.label_a, c.harness_errors_b.size(), c.label_b);
  }
  return line;
}

// The flagged problems' own figures on both sides: one row per problem and protocol.
Table flagged_table(const Comparison& c) {
  const std::vector<std::string> figures = {"tasks", "correct_rate", "fast_1_tf32", "geomean_tf32"};
  Table t{{"problem", "protocol", "why"}, {}};
  for (const auto& name : figures) {
    t.header.push_back(fmt::format("{} {}", name, c.label_a));
    t.header.push_back(fmt::format("{} {}", name, c.label_b));
  }
  for (const auto& g : c.groups) {
    if (g.group_by != "flagged_problem" || g.variant != "all") continue;
    auto why = c.flagged.find(g.key);
    std::vector<std::string> row{g.key, g.protocol,
                                 why == c.flagged.end() ? "" : tables::joined(why->second)};
    for (const auto& name : figures) {
      for (const auto& f : g.figures) {
        if (f.name != name) continue;
        row.push_back(tables::compact(f.a));
        row.push_back(tables::compact(f.b));
      }
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

constexpr const char* kEither = "in either database";

// The harness errors of both sides, listed under the tables.
std::string harness_errors_markdown(const Comparison& c) {
  std::string out;
  for (const auto& [label, rows] :
       {std::pair{&c.label_a, &c.harness_errors_a}, std::pair{&c.label_b, &c.harness_errors_b}}) {
    if (rows->empty()) continue;
    out += fmt::format("## Harness errors of {} (left out of every figure)\n\n", *label) +
           tables::markdown(tables::harness_errors(*rows));
  }
  return out;
}

std::string markdown(const Comparison& c, GroupBy by) {
  std::string out =
      fmt::format("# kbv compare: {} vs {}\n\n{}\n\n", c.label_a, c.label_b, candidates_line(c));
  if (!c.flagged.empty()) {
    out += tables::flagged_headline(c.flagged.size(), c.options.include_flagged, kEither) + "\n\n";
  }
  for (const auto& g : c.groups) {
    if (!shown(g, by)) continue;
    out += fmt::format("## {}\n\n", title(g)) + tables::markdown(diff_table(c, g));
  }
  if (!c.flagged.empty()) {
    out += "## Flagged problems\n\n" + tables::markdown(flagged_table(c)) +
           tables::flagged_note(c.flagged.size(), c.options.include_flagged, kEither) + "\n\n";
  }
  return out + harness_errors_markdown(c);
}

std::string csv(const Comparison& c) {
  std::string out = "protocol,group_by,group,variant,figure,a,b,diff\n";
  const auto num = [](const std::optional<double>& v) {
    return v ? fmt::format("{:g}", *v) : std::string();
  };
  for (const auto& g : c.groups) {
    for (const auto& f : g.figures) {
      out +=
          fmt::format("{},{},{},{},{},{},{},{}\n", tables::csv_field(g.protocol), g.group_by,
                      tables::csv_field(g.key), g.variant, f.name, num(f.a), num(f.b), num(f.diff));
    }
  }
  return out;
}

std::string html(const Comparison& c, GroupBy by) {
  std::string out =
      fmt::format("<h1>kbv compare: {} vs {}</h1>\n<p>{}</p>\n", svg::escape(c.label_a),
                  svg::escape(c.label_b), svg::escape(candidates_line(c)));
  if (!c.flagged.empty()) {
    out += "<p>" +
           svg::escape(
               tables::flagged_headline(c.flagged.size(), c.options.include_flagged, kEither)) +
           "</p>\n";
  }
  // One bar chart per protocol's overall figures: compiled, correct, fast_1 vs TF32.
  for (const auto& g : c.groups) {
    if (g.group_by != "overall" || g.variant != "all") continue;
    std::vector<std::string> categories = {"compile_rate", "correct_rate", "fast_1_tf32"};
    std::vector<std::vector<double>> values;
    for (const auto& name : categories) {
      values.emplace_back();
      for (const auto& f : g.figures) {
        if (f.name == name) values.back() = {f.a.value_or(0), f.b.value_or(0)};
      }
    }
    out += fmt::format("<h2>protocol {}</h2>\n<figure>", svg::escape(g.protocol)) +
           svg::bars(categories, {c.label_a, c.label_b}, values) + "</figure>\n";
  }
  for (const auto& g : c.groups) {
    if (!shown(g, by)) continue;
    out += fmt::format("<h3>{}</h3>\n", svg::escape(title(g))) + tables::html(diff_table(c, g));
  }
  if (!c.flagged.empty()) {
    out += "<h2>Flagged problems</h2>\n" + tables::html(flagged_table(c)) + "<p>" +
           svg::escape(tables::flagged_note(c.flagged.size(), c.options.include_flagged, kEither)) +
           "</p>\n";
  }
  for (const auto& [label, rows] :
       {std::pair{&c.label_a, &c.harness_errors_a}, std::pair{&c.label_b, &c.harness_errors_b}}) {
    if (rows->empty()) continue;
    out += fmt::format("<h3>Harness errors of {} (left out of every figure)</h3>\n",
                       svg::escape(*label)) +
           tables::html(tables::harness_errors(*rows));
  }
  return tables::html_page("kbv compare", "", out);
}

}  // namespace

std::string render(const Comparison& comparison, Format format, GroupBy by) {
  switch (format) {
    case Format::Markdown:
      return markdown(comparison, by);
    case Format::Json:
      return comparison.to_json().dump(2) + "\n";
    case Format::Csv:
      return csv(comparison);
    case Format::Html:
      return html(comparison, by);
  }
  return "";
}

}  // namespace kbv::report
