#include "report/tables.hpp"

#include <fmt/format.h>

#include "core/figure_format.hpp"
#include "report/svg.hpp"

namespace kbv::report::tables {

std::string na() { return "n/a"; }

std::string percent(int num, int den) {
  if (den <= 0) return na();
  return fmt::format("{:.1f}% ({}/{})", 100.0 * num / den, num, den);
}

std::string estimate(const Estimate& e) {
  if (!e.value) return na();
  return fmt::format("{} [{}, {}]", significant(*e.value), significant(*e.ci_low),
                     significant(*e.ci_high));
}

std::string number(const std::optional<double>& v) { return v ? significant(*v) : na(); }

std::string compact(const std::optional<double>& v) {
  return v ? significant(*v, 4, TrailingZeros::Trim) : na();
}

std::string counts(const std::map<std::string, int>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", k, v);
  return out.empty() ? "-" : out;
}

std::vector<LabelledFigures> rows_of(const Section& s, GroupBy by, bool best) {
  std::vector<LabelledFigures> rows;
  const auto add = [&](const Group& g) {
    if (!best) {
      rows.push_back({g.key, &g.figures});
    } else if (g.best_of_n) {
      rows.push_back({g.key, &*g.best_of_n});
    }
  };
  for (const auto& g : by == GroupBy::Run ? s.by_run : s.by_level) add(g);
  add(s.overall);
  return rows;
}

Table correctness(const std::vector<LabelledFigures>& rows, const std::string& first) {
  Table t{{first, "tasks", "compiled", "correct", "native ok", "hidden ok", "caught by hidden",
           "incorrect: first failing family", "rejected: flag ids"},
          {}};
  for (const auto& [key, f] : rows) {
    t.rows.push_back({key, std::to_string(f->tasks), percent(f->compiled, f->tasks),
                      percent(f->correct, f->tasks), percent(f->native_ok, f->tasks),
                      percent(f->hidden_ok, f->hidden_tasks), std::to_string(f->caught_by_hidden),
                      counts(f->first_failing_family), counts(f->reject_flags)});
  }
  return t;
}

Table speed(const std::vector<LabelledFigures>& rows, const std::string& first, bool tf32,
            const std::vector<double>& fast_p) {
  Table t{{first}, {}};
  for (double p : fast_p) t.header.push_back(fmt::format("fast_{:g}", p));
  for (const char* h : {"geomean (correct) [95% CI]", "geomean (failures = 1) [95% CI]", "timed",
                        "wins / ties / losses"}) {
    t.header.push_back(h);
  }
  for (const auto& [key, f] : rows) {
    const SpeedupFigures& s = tf32 ? f->vs_tf32 : f->vs_fp32;
    std::vector<std::string> row{key};
    for (const auto& [p, count] : s.fast) row.push_back(percent(count, f->tasks));
    row.push_back(estimate(s.geomean));
    row.push_back(estimate(s.geomean_failures_as_one));
    row.push_back(std::to_string(s.timed));
    row.push_back(fmt::format("{} / {} / {}", s.wins, s.ties, s.losses));
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table memory(const std::vector<LabelledFigures>& rows, const std::string& first, double band) {
  Table t{{first, "measured", "efficiency: geomean ref/cand peak [95% CI]",
           fmt::format("raise peak > {:g}x", band), "median ratio among those"},
          {}};
  for (const auto& [key, f] : rows) {
    t.rows.push_back({key, std::to_string(f->memory_measured), estimate(f->memory_efficiency),
                      percent(f->memory_raised, f->memory_measured),
                      number(f->memory_raised_median_ratio)});
  }
  return t;
}

Table protocols(const ProtocolComparison& pc) {
  Table t{{"figure"}, {}};
  for (const auto& g : pc.overall) t.header.push_back(g.key);
  std::vector<std::vector<std::pair<std::string, std::optional<double>>>> columns;
  for (const auto& g : pc.overall) columns.push_back(scalars(g.figures));
  if (columns.empty()) return t;
  for (size_t i = 0; i < columns[0].size(); ++i) {
    std::vector<std::string> row{columns[0][i].first};
    for (const auto& c : columns) row.push_back(compact(c[i].second));
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table disagreement(const ProtocolComparison& pc) {
  Table t{{"correct under \\ not under"}, {}};
  for (const auto& p : pc.protocols) t.header.push_back(p);
  for (const auto& a : pc.protocols) {
    std::vector<std::string> row{a};
    for (const auto& b : pc.protocols) {
      row.push_back(a == b ? "-" : std::to_string(pc.correct_in_a_not_b.at({a, b})));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string joined(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ", ") + id;
  return out;
}

Table flagged(const Report& r) {
  Table t{{"problem", "protocol", "why", "tasks", "compiled", "correct", "fast_1 vs TF32",
           "geomean vs TF32 (correct) [95% CI]", "geomean vs FP32 (correct) [95% CI]"},
          {}};
  for (const auto& [problem, why] : r.flagged) {
    for (const auto& s : r.sections) {
      for (const auto& g : s.flagged) {
        if (g.key != problem) continue;
        const Figures& f = g.figures;
        int fast1 = 0;
        for (const auto& [p, count] : f.vs_tf32.fast) fast1 = p == 1 ? count : fast1;
        t.rows.push_back({problem, s.protocol, joined(why), std::to_string(f.tasks),
                          percent(f.compiled, f.tasks), percent(f.correct, f.tasks),
                          percent(fast1, f.tasks), estimate(f.vs_tf32.geomean),
                          estimate(f.vs_fp32.geomean)});
      }
    }
  }
  return t;
}

namespace {

std::string flagged_subject(size_t n, std::string_view where) {
  return fmt::format(
      "{} problem{} flagged degenerate or with a reference failing its float64 run{}{} {}", n,
      n == 1 ? "" : "s", where.empty() ? "" : " ", where, n == 1 ? "is" : "are");
}

}  // namespace

std::string flagged_note(size_t problems, bool included, std::string_view where) {
  if (problems == 0) return "";
  if (included) {
    return flagged_subject(problems, where) +
           fmt::format(
               " in the aggregates above (--include-flagged); without that option {} left "
               "out.",
               problems == 1 ? "it is" : "they are");
  }
  return flagged_subject(problems, where) + fmt::format(
                                                " left out of the aggregates above; "
                                                "--include-flagged puts {} back.",
                                                problems == 1 ? "it" : "them");
}

std::string flagged_headline(size_t problems, bool included, std::string_view where) {
  if (problems == 0) return "";
  const bool one = problems == 1;
  if (included) {
    return flagged_subject(problems, where) +
           fmt::format(
               " in every figure (--include-flagged); {} own figures are under Flagged "
               "problems.",
               one ? "its" : "their");
  }
  return flagged_subject(problems, where) +
         fmt::format(
             " left out of every figure; {} own figures are under Flagged problems "
             "(--include-flagged puts {} back).",
             one ? "its" : "their", one ? "it" : "them");
}

Table harness_errors(const std::vector<HarnessErrorRow>& rows) {
  Table t{{"run", "level", "problem", "sample", "protocol", "kind", "while", "reason"}, {}};
  const auto opt = [](const std::optional<int>& v) { return v ? std::to_string(*v) : "-"; };
  for (const auto& h : rows) {
    t.rows.push_back({h.task.run, opt(h.task.level), h.task.problem, opt(h.task.sample),
                      h.task.protocol, h.kind, h.stage, h.task.reason});
  }
  return t;
}

std::string harness_errors_note(const std::vector<HarnessErrorRow>& rows) {
  if (rows.empty()) return "";
  return fmt::format(
      "{} harness error{} (faults of kbv itself, not verdicts on the candidates) {} left out of "
      "every figure and listed at the end; a rerun of kbv run evaluates {} again.",
      rows.size(), rows.size() == 1 ? "" : "s", rows.size() == 1 ? "is" : "are",
      rows.size() == 1 ? "it" : "them");
}

std::string markdown(const Table& t) {
  const auto cell = [](std::string s) {
    std::string out;
    for (char c : s) {
      if (c == '|')
        out += "\\|";
      else if (c == '\n')
        out += ' ';
      else
        out += c;
    }
    return out;
  };
  std::string out = "|";
  for (const auto& h : t.header) out += " " + cell(h) + " |";
  out += "\n|";
  for (size_t i = 0; i < t.header.size(); ++i) out += i == 0 ? "---|" : "--:|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& c : row) out += " " + cell(c) + " |";
    out += "\n";
  }
  return out + "\n";
}

std::string html(const Table& t) {
  std::string out = "<table>\n<tr>";
  for (const auto& h : t.header) out += "<th>" + svg::escape(h) + "</th>";
  out += "</tr>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (const auto& c : row) out += "<td>" + svg::escape(c) + "</td>";
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {

// The table style every kbv page shares; a page adds its own rules after it.
constexpr const char* kTableCss = R"(body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}
)";

}  // namespace

std::string group_name(GroupBy by) { return by == GroupBy::Run ? "run" : "level"; }

std::string html_page(std::string_view title, std::string_view extra_css, std::string_view body) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  out += svg::escape(std::string(title));
  out += "</title>\n<style>\n";
  out += kTableCss;
  out += extra_css;
  out += "</style>\n</head>\n<body>\n";
  out += body;
  return out + "</body>\n</html>\n";
}

}  // namespace kbv::report::tables
