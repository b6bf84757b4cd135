// `kbv report --format html`: a self-contained page (inline CSS and SVG, no network) with the
// tables, per-run figures, the protocols side by side and every result with a link to its source.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "core/figure_format.hpp"
#include "report/formats.hpp"
#include "report/svg.hpp"
#include "report/tables.hpp"

namespace kbv::report {

using namespace tables;

namespace {

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
    if (!t.problem_flags.empty()) {
      flags += (flags.empty() ? "" : " ") + std::string("(problem flagged: ") +
               joined(t.problem_flags) + ")";
    }
    out += fmt::format(
        "<tr class=\"{0}\"><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td><td>{5}</td>"
        "<td>{6}</td><td title=\"{7}\">{8}</td><td>{9}</td><td>{10}</td><td>{11}</td>"
        "<td>{12}</td><td>{13}</td><td>{14}</td></tr>\n",
        svg::escape(t.verdict), svg::escape(t.protocol), svg::escape(t.run), opt(t.level),
        opt(t.problem_id), svg::escape(t.problem), opt(t.sample), svg::escape(t.reason),
        svg::escape(t.verdict), svg::escape(t.first_failing_family), svg::escape(flags),
        number(t.speedup_tf32) + (t.tie_tf32 ? " (tie)" : ""), number(t.speedup_fp32),
        number(t.peak_ratio),
        t.candidate_path.empty()
            ? std::string()
            : fmt::format("<a href=\"{}\">source</a>", svg::escape(file_url(t.candidate_path))));
  }
  return out + "</table>\n";
}

// Beyond the shared table style (tables::html_page): the figures and the per-result table.
constexpr const char* kReportCss = R"(.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0}
tr.correct td:nth-child(7){color:#2a7a2a}
tr.incorrect td:nth-child(7),tr.rejected td:nth-child(7){color:#b22}
table.tasks td{text-align:left}
)";

}  // namespace

std::string html_report(const Report& r, GroupBy by) {
  std::string out = "<h1>kbv report</h1>\n";
  out += fmt::format(
      "<p>{} results. Rates are over every task of the group (failures "
      "included); intervals are {:g}% bootstrap intervals over tasks.</p>\n",
      r.results, 100 * r.options.confidence);
  if (!r.harness_errors.empty()) {
    out += "<p>" + svg::escape(harness_errors_note(r.harness_errors)) + "</p>\n";
  }
  if (!r.flagged.empty()) {
    out += "<p>" + svg::escape(flagged_headline(r.flagged.size(), r.options.include_flagged)) +
           "</p>\n";
  }
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
      // The plots are figures too: a flagged problem's kernels only with --include-flagged.
      if (!t.problem_flags.empty() && !r.options.include_flagged) continue;
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
             fmt::format("{} sample {}: {}, memory {}", t->problem, t->sample.value_or(0),
                         times(*t->speedup_tf32), times(1 / *t->peak_ratio))});
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
  if (r.flagged.empty()) {
    out +=
        "<p>None: no problem is flagged degenerate or with a reference failing its float64 "
        "run.</p>\n";
  } else {
    out +=
        "<p><code>problem_degenerate</code>: the output does not depend on the inputs; "
        "<code>reference_fails_float64</code>: the TF32 reference is far from its own float64 "
        "run. A flag about a problem holds for every candidate of it.</p>\n";
    out += html(flagged(r)) + "<p>" +
           svg::escape(flagged_note(r.flagged.size(), r.options.include_flagged)) + "</p>\n";
  }
  out += "<h2>Results</h2>\n" + html_tasks(r.tasks);
  if (!r.harness_errors.empty()) {
    out += "<h2>Harness errors (faults of kbv, left out of every figure)</h2>\n" +
           html(harness_errors(r.harness_errors));
  }
  return html_page("kbv report", kReportCss, out);
}

}  // namespace kbv::report
