#include "report/render.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "report/svg.hpp"
#include "report/tables.hpp"

namespace kbv::report {

using nlohmann::json;

std::optional<Format> parse_format(std::string_view name) {
  if (name == "md" || name == "markdown") return Format::Markdown;
  if (name == "json") return Format::Json;
  if (name == "csv") return Format::Csv;
  if (name == "html") return Format::Html;
  return std::nullopt;
}

std::optional<GroupBy> parse_group_by(std::string_view name) {
  if (name == "run" || name == "model") return GroupBy::Run;
  if (name == "level") return GroupBy::Level;
  return std::nullopt;
}

namespace tables {

std::string na() { return "n/a"; }

std::string percent(int num, int den) {
  if (den <= 0) return na();
  return fmt::format("{:.1f}% ({}/{})", 100.0 * num / den, num, den);
}

std::string estimate(const Estimate& e) {
  if (!e.value) return na();
  return fmt::format("{:.3f} [{:.3f}, {:.3f}]", *e.value, *e.ci_low, *e.ci_high);
}

std::string number(const std::optional<double>& v, int digits) {
  return v ? fmt::format("{:.{}f}", *v, digits) : na();
}

std::string compact(const std::optional<double>& v) { return v ? fmt::format("{:.4g}", *v) : na(); }

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
                      number(f->memory_raised_median_ratio, 3)});
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

}  // namespace tables

namespace {

using namespace tables;

std::string group_name(GroupBy by) { return by == GroupBy::Run ? "run" : "level"; }

std::string markdown_report(const Report& r, GroupBy by) {
  std::string out = "# kbv report\n\n";
  out += fmt::format("{} results", r.results);
  if (!r.sections.empty()) {
    out += ", protocols:";
    for (const auto& s : r.sections) out += " `" + s.protocol + "`";
  }
  out += fmt::format(
      ". Rates are over every task of the group (failures included) unless the "
      "column says otherwise; intervals are {:g}% bootstrap intervals over tasks; "
      "see docs/reporting.md.\n\n",
      100 * r.options.confidence);
  if (r.sections.empty()) out += "No results.\n\n";
  for (const auto& s : r.sections) {
    out += fmt::format("## Protocol `{}`\n\n", s.protocol);
    for (bool best : {false, true}) {
      const auto rows = rows_of(s, by, best);
      if (rows.empty()) continue;
      if (best) out += "### Best of N samples per problem (best correct speedup vs TF32)\n\n";
      out += "Correctness\n\n" + markdown(correctness(rows, group_name(by)));
      out += "Speedup vs TF32\n\n" + markdown(speed(rows, group_name(by), true, r.options.fast_p));
      out += "Speedup vs FP32\n\n" + markdown(speed(rows, group_name(by), false, r.options.fast_p));
      out += "Memory (correct kernels)\n\n" +
             markdown(memory(rows, group_name(by), r.options.memory_noise_band));
    }
  }
  if (r.protocols) {
    out += fmt::format("## Protocols side by side ({} candidates evaluated under every one)\n\n",
                       r.protocols->common_candidates);
    out += markdown(protocols(*r.protocols));
    out += "Candidates correct under one protocol but not another\n\n" +
           markdown(disagreement(*r.protocols));
  }
  out += "## Flagged problems\n\n";
  const auto list = [&](const char* title, const std::vector<std::string>& names) {
    out += fmt::format("{}: {}\n\n", title, names.empty() ? "none" : "");
    for (const auto& n : names) out += "- " + n + "\n";
    if (!names.empty()) out += "\n";
  };
  list("Degenerate (output does not depend on the inputs)", r.degenerate_problems);
  list("Reference fails against float64", r.reference_fails_float64_problems);
  return out;
}

std::string csv_report(const Report& r) {
  struct Row {
    std::string protocol, by, key, variant;
    const Figures* f;
  };
  std::vector<Row> rows;
  const auto add = [&](const std::string& protocol, const char* by, const Group& g) {
    rows.push_back({protocol, by, g.key, "all", &g.figures});
    if (g.best_of_n) rows.push_back({protocol, by, g.key, "best_of_n", &*g.best_of_n});
  };
  for (const auto& s : r.sections) {
    for (const auto& g : s.by_run) add(s.protocol, "run", g);
    for (const auto& g : s.by_level) add(s.protocol, "level", g);
    add(s.protocol, "overall", s.overall);
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
  out += "\n";
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
    out += "\n";
  }
  return out;
}

std::string file_url(const std::string& path) {
  std::string out = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || std::string_view("/-._~").find(char(c)) != std::string_view::npos) {
      out += char(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string html_tasks(const std::vector<TaskRow>& tasks) {
  std::string out =
      "<table class=\"tasks\">\n<tr><th>protocol</th><th>run</th><th>level</th><th>id</th>"
      "<th>problem</th><th>sample</th><th>verdict</th><th>first failing family</th>"
      "<th>flags</th><th>vs TF32</th><th>vs FP32</th><th>peak ratio</th><th>source</th></tr>\n";
  const auto opt = [](const std::optional<int>& v) { return v ? std::to_string(*v) : ""; };
  for (const auto& t : tasks) {
    std::string flags;
    for (const auto& f : t.flags) flags += (flags.empty() ? "" : " ") + f;
    out += fmt::format(
        "<tr class=\"{0}\"><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td><td>{5}</td>"
        "<td>{6}</td><td title=\"{7}\">{8}</td><td>{9}</td><td>{10}</td><td>{11}</td>"
        "<td>{12}</td><td>{13}</td><td>{14}</td></tr>\n",
        svg::escape(t.verdict), svg::escape(t.protocol), svg::escape(t.run), opt(t.level),
        opt(t.problem_id), svg::escape(t.problem), opt(t.sample), svg::escape(t.reason),
        svg::escape(t.verdict), svg::escape(t.first_failing_family), svg::escape(flags),
        number(t.speedup_tf32, 3) + (t.tie_tf32 ? " (tie)" : ""), number(t.speedup_fp32, 3),
        number(t.peak_ratio, 3),
        t.candidate_path.empty()
            ? std::string()
            : fmt::format("<a href=\"{}\">source</a>", svg::escape(file_url(t.candidate_path))));
  }
  return out + "</table>\n";
}

constexpr const char* kCss = R"(body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}
.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0}
tr.correct td:nth-child(7){color:#2a7a2a}
tr.incorrect td:nth-child(7),tr.rejected td:nth-child(7){color:#b22}
table.tasks td{text-align:left})";

std::string html_report(const Report& r, GroupBy by) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>kbv report</title>\n<style>\n";
  out += std::string(kCss) + "\n</style>\n</head>\n<body>\n<h1>kbv report</h1>\n";
  out += fmt::format(
      "<p>{} results. Rates are over every task of the group (failures "
      "included); intervals are {:g}% bootstrap intervals over tasks.</p>\n",
      r.results, 100 * r.options.confidence);
  for (const auto& s : r.sections) {
    out += fmt::format("<h2>Protocol <code>{}</code></h2>\n", svg::escape(s.protocol));
    for (bool best : {false, true}) {
      const auto rows = rows_of(s, by, best);
      if (rows.empty()) continue;
      if (best) out += "<h3>Best of N samples per problem (best correct speedup vs TF32)</h3>\n";
      out += "<h4>Correctness</h4>\n" + html(correctness(rows, group_name(by)));
      out +=
          "<h4>Speedup vs TF32</h4>\n" + html(speed(rows, group_name(by), true, r.options.fast_p));
      out +=
          "<h4>Speedup vs FP32</h4>\n" + html(speed(rows, group_name(by), false, r.options.fast_p));
      out += "<h4>Memory (correct kernels)</h4>\n" +
             html(memory(rows, group_name(by), r.options.memory_noise_band));
    }
    // Per run: speedup against memory efficiency (colour = level), and the speedups' histogram.
    std::map<std::string, std::vector<const TaskRow*>> runs;
    for (const auto& t : r.tasks) {
      if (t.protocol == s.protocol) runs[t.run].push_back(&t);
    }
    for (const auto& [run, tasks] : runs) {
      std::vector<std::string> levels;
      for (const TaskRow* t : tasks) {
        const std::string l = t->level ? fmt::format("level {}", *t->level) : "level ?";
        if (std::find(levels.begin(), levels.end(), l) == levels.end()) levels.push_back(l);
      }
      std::sort(levels.begin(), levels.end());
      std::vector<svg::Point> points;
      std::vector<double> speedups;
      for (const TaskRow* t : tasks) {
        if (t->verdict != "correct" || !t->speedup_tf32) continue;
        speedups.push_back(*t->speedup_tf32);
        if (!t->peak_ratio) continue;
        const std::string l = t->level ? fmt::format("level {}", *t->level) : "level ?";
        const auto series = std::find(levels.begin(), levels.end(), l) - levels.begin();
        points.push_back(
            {*t->speedup_tf32, 1 / *t->peak_ratio, static_cast<int>(series),
             fmt::format("{} sample {}: {:.3f}x, memory {:.3f}x", t->problem, t->sample.value_or(0),
                         *t->speedup_tf32, 1 / *t->peak_ratio)});
      }
      out += fmt::format("<h3>Run <code>{}</code></h3>\n<div class=\"plots\">\n", svg::escape(run));
      out +=
          "<figure>" +
          svg::scatter(points, levels, "speedup vs TF32", "memory efficiency (ref / cand peak)") +
          "<figcaption>speedup vs memory efficiency, correct kernels</figcaption></figure>\n";
      out += "<figure>" + svg::histogram(speedups, "speedup vs TF32") +
             "<figcaption>speedups of correct kernels</figcaption></figure>\n</div>\n";
    }
  }
  if (r.protocols) {
    const auto& pc = *r.protocols;
    out += fmt::format(
        "<h2>Protocols side by side ({} candidates evaluated under every "
        "one)</h2>\n",
        pc.common_candidates);
    const std::vector<std::string> categories = {"compiled", "correct", "fast_1 TF32",
                                                 "fast_1 FP32"};
    std::vector<std::vector<double>> values(categories.size());
    for (const auto& g : pc.overall) {
      const Figures& f = g.figures;
      const auto share = [&](int n) { return f.tasks > 0 ? double(n) / f.tasks : 0.0; };
      const auto fast1 = [&](const SpeedupFigures& sp) {
        for (const auto& [p, count] : sp.fast) {
          if (p == 1) return share(count);
        }
        return 0.0;
      };
      values[0].push_back(share(f.compiled));
      values[1].push_back(share(f.correct));
      values[2].push_back(fast1(f.vs_tf32));
      values[3].push_back(fast1(f.vs_fp32));
    }
    out += "<figure>" + svg::bars(categories, pc.protocols, values) +
           "<figcaption>share of the common candidates</figcaption></figure>\n";
    out += html(protocols(pc));
    out +=
        "<h4>Candidates correct under one protocol but not another</h4>\n" + html(disagreement(pc));
  }
  out += "<h2>Flagged problems</h2>\n";
  const auto list = [&](const char* title, const std::vector<std::string>& names) {
    out += fmt::format("<p>{}: {}</p>\n", title, names.empty() ? "none" : "");
    if (names.empty()) return;
    out += "<ul>\n";
    for (const auto& n : names) out += "<li>" + svg::escape(n) + "</li>\n";
    out += "</ul>\n";
  };
  list("Degenerate (output does not depend on the inputs)", r.degenerate_problems);
  list("Reference fails against float64", r.reference_fails_float64_problems);
  out += "<h2>Results</h2>\n" + html_tasks(r.tasks);
  return out + "</body>\n</html>\n";
}

}  // namespace

std::string render(const Report& report, Format format, GroupBy by) {
  switch (format) {
    case Format::Markdown:
      return markdown_report(report, by);
    case Format::Json:
      return report.to_json().dump(2) + "\n";
    case Format::Csv:
      return csv_report(report);
    case Format::Html:
      return html_report(report, by);
  }
  return "";
}

}  // namespace kbv::report
