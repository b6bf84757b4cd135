#include "report/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "stats/rng.hpp"

namespace kbv::report {

using nlohmann::json;

namespace {

using stats::Rng;

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - double(i)) * (sorted[i + 1] - sorted[i]);
}

std::optional<double> number(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<int> integer(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

std::string text(const json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

const json& at(const json& j, const char* key) {
  static const json null;
  if (!j.is_object()) return null;
  auto it = j.find(key);
  return it == j.end() ? null : *it;
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

double ratio(int num, int den) { return double(num) / double(den); }
json rate(int num, int den) { return den > 0 ? json(ratio(num, den)) : json(nullptr); }

// A measured speedup against one baseline: value > 0, else unset.
struct Speedup {
  double value = 0, ci_low = 0, ci_high = 0;
  bool tie = false;
};
std::optional<Speedup> speedup_of(const json& r, const char* which) {
  const json& s = at(at(r, "speedup"), which);
  auto v = number(s, "value");
  if (!v || *v <= 0) return std::nullopt;
  return Speedup{*v, number(s, "ci_low").value_or(*v), number(s, "ci_high").value_or(*v),
                 s.value("tie", false)};
}

// candidate peak / reference peak, when both peaks are measured and positive.
std::optional<double> peak_ratio_of(const json& r) {
  const json& m = at(r, "memory");
  auto cand = number(m, "candidate_peak_bytes"), ref = number(m, "reference_peak_bytes");
  if (cand && ref) {
    if (*cand > 0 && *ref > 0) return *cand / *ref;
    return std::nullopt;
  }
  auto pr = number(m, "peak_ratio");
  return pr && *pr > 0 ? pr : std::nullopt;
}

std::string verdict_of(const json& r) { return text(r, "verdict", "unknown"); }
bool is_correct(const json& r) { return verdict_of(r) == "correct"; }

bool family_ok(const json& r, const std::string& family) {
  const json& f = at(at(r, "correctness"), family.c_str());
  return f.is_object() && f.value("ok", false);
}

std::string problem_label(const json& r) {
  const json& row = at(r, "_row");
  std::string name = text(row, "problem", text(at(r, "problem"), "name", "?"));
  auto level = integer(row, "level");
  return level ? fmt::format("level{}/{}", *level, name) : name;
}

std::string protocol_of(const json& r) { return text(at(r, "protocol"), "name", "unknown"); }
std::string run_of(const json& r) { return text(at(r, "_row"), "run", "?"); }
std::string level_key(const json& r) {
  auto level = integer(at(r, "_row"), "level");
  return level ? fmt::format("level {}", *level) : "level ?";
}

// (run, level, problem): the task best-of-N picks one sample for.
using ProblemKey = std::tuple<std::string, int, std::string>;
ProblemKey problem_key(const json& r) {
  const json& row = at(r, "_row");
  return {run_of(r), integer(row, "level").value_or(-1),
          text(row, "problem", text(at(r, "problem"), "name", "?"))};
}
// (run, level, problem, sample): one candidate, whatever the protocol.
using CandidateKey = std::tuple<std::string, int, std::string, int>;
CandidateKey candidate_key(const json& r) {
  auto [run, level, problem] = problem_key(r);
  return {run, level, problem, integer(at(r, "_row"), "sample").value_or(-1)};
}

void speedup_figures(const std::vector<const json*>& rs, const char* which, const Options& o,
                     SpeedupFigures& s) {
  std::vector<double> timed, all;
  for (double p : o.fast_p) s.fast.emplace_back(p, 0);
  for (const json* r : rs) {
    const bool correct = is_correct(*r);
    auto sp = correct ? speedup_of(*r, which) : std::nullopt;
    if (!correct) all.push_back(1.0);
    if (!sp) continue;
    ++s.timed;
    timed.push_back(sp->value);
    all.push_back(sp->value);
    for (auto& [p, count] : s.fast) count += sp->value > p ? 1 : 0;
    if (sp->tie) {
      ++s.ties;
    } else if (sp->ci_low > 1) {
      ++s.wins;
    } else if (sp->ci_high < 1) {
      ++s.losses;
    } else {
      ++s.ties;  // an interval containing 1 is a tie even when unmarked
    }
  }
  s.geomean = geomean(timed, o);
  s.geomean_failures_as_one = geomean(all, o);
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

Figures figures_of(const std::vector<const json*>& rs, const Options& o) {
  Figures f;
  f.tasks = static_cast<int>(rs.size());
  std::vector<double> efficiency, raised;
  for (const json* rp : rs) {
    const json& r = *rp;
    const std::string verdict = verdict_of(r);
    ++f.verdicts[verdict];
    f.compiled += verdict != "compile_error" ? 1 : 0;
    f.correct += verdict == "correct" ? 1 : 0;

    const auto families = family_order(r);
    if (!families.empty()) {
      const std::string& native = families.front();
      const bool native_ok = family_ok(r, native);
      f.native_ok += native_ok ? 1 : 0;
      for (const auto& fam : families) f.family_ok[fam] += family_ok(r, fam) ? 1 : 0;
      if (families.size() > 1) {
        ++f.hidden_tasks;
        const bool hidden_ok = std::all_of(families.begin() + 1, families.end(),
                                           [&](const std::string& h) { return family_ok(r, h); });
        f.hidden_ok += hidden_ok ? 1 : 0;
        f.caught_by_hidden += native_ok && !hidden_ok ? 1 : 0;
      }
    }
    if (verdict == "incorrect") {
      ++f.incorrect;
      ++f.first_failing_family[first_failing_family(r).value_or("other")];
    }
    if (verdict == "rejected") {
      ++f.rejected;
      std::set<std::string> ids;
      for (const auto& flag : at(r, "flags")) {
        if (text(flag, "severity") == "reject") ids.insert(text(flag, "id", "?"));
      }
      if (ids.empty()) ids.insert("other");
      for (const auto& id : ids) ++f.reject_flags[id];
    }
    if (verdict == "correct") {
      if (auto pr = peak_ratio_of(r)) {
        ++f.memory_measured;
        efficiency.push_back(1.0 / *pr);
        if (*pr > o.memory_noise_band) raised.push_back(*pr);
      }
    }
  }
  speedup_figures(rs, "vs_tf32", o, f.vs_tf32);
  speedup_figures(rs, "vs_fp32", o, f.vs_fp32);
  f.memory_efficiency = geomean(efficiency, o);
  f.memory_raised = static_cast<int>(raised.size());
  if (!raised.empty()) f.memory_raised_median_ratio = median(raised);
  return f;
}

// One result per (run, level, problem): the correct sample with the best speedup vs TF32 (an
// untimed correct one before any incorrect), else the one that got furthest (incorrect, rejected,
// runtime_error, timeout, compile_error); ties to the lowest sample.
std::vector<const json*> best_of_n(const std::vector<const json*>& rs, bool& several) {
  std::map<ProblemKey, std::vector<const json*>> by_problem;
  for (const json* r : rs) by_problem[problem_key(*r)].push_back(r);
  several = false;
  const auto rank = [](const json& r) -> std::pair<int, double> {
    static const std::map<std::string, int> order = {{"correct", 0},  {"incorrect", 1},
                                                     {"rejected", 2}, {"runtime_error", 3},
                                                     {"timeout", 4},  {"compile_error", 5}};
    auto it = order.find(verdict_of(r));
    const int v = it == order.end() ? 6 : it->second;
    auto sp = v == 0 ? speedup_of(r, "vs_tf32") : std::nullopt;
    return {v, sp ? -sp->value : 0.0};
  };
  std::vector<const json*> picked;
  for (auto& [key, samples] : by_problem) {
    several = several || samples.size() > 1;
    std::stable_sort(samples.begin(), samples.end(), [](const json* a, const json* b) {
      return integer(at(*a, "_row"), "sample").value_or(-1) <
             integer(at(*b, "_row"), "sample").value_or(-1);
    });
    picked.push_back(
        *std::min_element(samples.begin(), samples.end(),
                          [&](const json* a, const json* b) { return rank(*a) < rank(*b); }));
  }
  return picked;
}

Group group_of(std::string key, const std::vector<const json*>& rs, const Options& o) {
  Group g;
  g.key = std::move(key);
  g.figures = figures_of(rs, o);
  bool several = false;
  auto best = best_of_n(rs, several);
  if (several) g.best_of_n = figures_of(best, o);
  return g;
}

template <class KeyFn>
std::vector<Group> groups_by(const std::vector<const json*>& rs, KeyFn key, const Options& o) {
  std::map<std::string, std::vector<const json*>> parts;
  for (const json* r : rs) parts[key(*r)].push_back(r);
  std::vector<Group> out;
  for (const auto& [k, members] : parts) out.push_back(group_of(k, members, o));
  return out;
}

std::optional<ProtocolComparison> compare_protocols(
    const std::map<std::string, std::vector<const json*>>& by_protocol, const Options& o) {
  if (by_protocol.size() < 2) return std::nullopt;
  ProtocolComparison pc;
  std::map<CandidateKey, std::map<std::string, const json*>> candidates;
  for (const auto& [protocol, rs] : by_protocol) {
    pc.protocols.push_back(protocol);
    for (const json* r : rs) candidates[candidate_key(*r)].emplace(protocol, r);
  }
  std::map<std::string, std::vector<const json*>> common;
  for (const auto& [key, per_protocol] : candidates) {
    if (per_protocol.size() != by_protocol.size()) continue;
    ++pc.common_candidates;
    for (const auto& [protocol, r] : per_protocol) common[protocol].push_back(r);
    for (const auto& [a, ra] : per_protocol) {
      for (const auto& [b, rb] : per_protocol) {
        if (a != b && is_correct(*ra) && !is_correct(*rb)) ++pc.correct_in_a_not_b[{a, b}];
      }
    }
  }
  for (const auto& a : pc.protocols) {
    for (const auto& b : pc.protocols) {
      if (a != b) pc.correct_in_a_not_b.try_emplace({a, b}, 0);
    }
  }
  for (const auto& protocol : pc.protocols) {
    const auto& rs = common[protocol];
    pc.overall.push_back(group_of(protocol, rs, o));
    std::map<std::string, std::vector<const json*>> runs;
    for (const json* r : rs) runs[run_of(*r)].push_back(r);
    for (const auto& [run, members] : runs)
      pc.by_run[run].push_back(group_of(protocol, members, o));
  }
  return pc;
}

TaskRow task_row(const json& r) {
  TaskRow t;
  const json& row = at(r, "_row");
  t.run = run_of(r);
  t.protocol = protocol_of(r);
  t.problem = text(row, "problem", text(at(r, "problem"), "name", "?"));
  t.verdict = verdict_of(r);
  t.reason = text(r, "reason");
  t.candidate_path = text(at(r, "candidate"), "path");
  t.level = integer(row, "level");
  t.problem_id = integer(row, "problem_id");
  t.sample = integer(row, "sample");
  for (const auto& flag : at(r, "flags")) {
    t.flags.push_back(text(flag, "severity", "?") + ":" + text(flag, "id", "?"));
  }
  if (auto s = speedup_of(r, "vs_tf32")) {
    t.speedup_tf32 = s->value;
    t.tie_tf32 = s->tie;
  }
  if (auto s = speedup_of(r, "vs_fp32")) t.speedup_fp32 = s->value;
  t.peak_ratio = peak_ratio_of(r);
  if (t.verdict == "incorrect") t.first_failing_family = first_failing_family(r).value_or("other");
  return t;
}

}  // namespace

std::vector<std::string> family_order(const json& result) {
  // The protocol's families, evaluated or not (a result that stopped early, or never built,
  // failed them all), then any the record does not list: "native" first, then by name.
  std::vector<std::string> order;
  for (const auto& f : at(at(result, "protocol"), "families")) {
    std::string name = f.is_string() ? f.get<std::string>() : text(f, "name");
    if (!name.empty() && std::find(order.begin(), order.end(), name) == order.end()) {
      order.push_back(name);
    }
  }
  std::vector<std::string> rest;
  const json& corr = at(result, "correctness");
  if (corr.is_object()) {
    for (const auto& [name, value] : corr.items()) {
      if (std::find(order.begin(), order.end(), name) == order.end()) rest.push_back(name);
    }
  }
  std::stable_partition(rest.begin(), rest.end(),
                        [](const std::string& n) { return n == "native"; });
  order.insert(order.end(), rest.begin(), rest.end());
  // The native family leads: "native" when present, else the protocol's first.
  auto native = std::find(order.begin(), order.end(), "native");
  if (native != order.end()) std::rotate(order.begin(), native, native + 1);
  return order;
}

std::optional<std::string> first_failing_family(const json& result) {
  for (const auto& fam : family_order(result)) {
    const json& f = at(at(result, "correctness"), fam.c_str());
    if (f.is_object() && f.value("evaluated", true) && !f.value("ok", false)) return fam;
  }
  return std::nullopt;
}

Estimate geomean(const std::vector<double>& values, const Options& o) {
  Estimate e;
  std::vector<double> logs;
  for (double v : values) {
    if (v > 0 && std::isfinite(v)) logs.push_back(std::log(v));
  }
  e.n = static_cast<int>(logs.size());
  if (logs.empty()) return e;
  const auto mean = [](const std::vector<double>& xs) {
    return std::accumulate(xs.begin(), xs.end(), 0.0) / double(xs.size());
  };
  e.value = std::exp(mean(logs));
  e.ci_low = e.ci_high = e.value;
  if (o.resamples > 0 && logs.size() > 1) {
    Rng rng(o.seed);
    std::vector<double> means(static_cast<size_t>(o.resamples)), scratch(logs.size());
    for (double& m : means) {
      for (double& x : scratch) x = logs[rng.below(logs.size())];
      m = mean(scratch);
    }
    std::sort(means.begin(), means.end());
    const double tail = (1 - o.confidence) / 2;
    e.ci_low = std::min(*e.value, std::exp(quantile_of_sorted(means, tail)));
    e.ci_high = std::max(*e.value, std::exp(quantile_of_sorted(means, 1 - tail)));
  }
  return e;
}

json Estimate::to_json() const {
  return {{"n", n}, {"value", opt(value)}, {"ci_low", opt(ci_low)}, {"ci_high", opt(ci_high)}};
}

namespace {

json speedup_json(const SpeedupFigures& s, int tasks) {
  json fast = json::object();
  for (const auto& [p, count] : s.fast) {
    fast[fmt::format("{:g}", p)] = {{"count", count}, {"rate", rate(count, tasks)}};
  }
  return {{"fast_p", fast},
          {"timed", s.timed},
          {"wins", s.wins},
          {"ties", s.ties},
          {"losses", s.losses},
          {"geomean", s.geomean.to_json()},
          {"geomean_failures_as_one", s.geomean_failures_as_one.to_json()}};
}

}  // namespace

json Figures::to_json() const {
  return {{"tasks", tasks},
          {"verdicts", verdicts},
          {"compiled", compiled},
          {"compile_rate", rate(compiled, tasks)},
          {"correct", correct},
          {"correct_rate", rate(correct, tasks)},
          {"native_ok", native_ok},
          {"native_rate", rate(native_ok, tasks)},
          {"hidden_tasks", hidden_tasks},
          {"hidden_ok", hidden_ok},
          {"hidden_rate", rate(hidden_ok, hidden_tasks)},
          {"caught_by_hidden", caught_by_hidden},
          {"family_ok", family_ok},
          {"incorrect", incorrect},
          {"first_failing_family", first_failing_family},
          {"rejected", rejected},
          {"reject_flags", reject_flags},
          {"vs_tf32", speedup_json(vs_tf32, tasks)},
          {"vs_fp32", speedup_json(vs_fp32, tasks)},
          {"memory",
           {{"measured", memory_measured},
            {"efficiency", memory_efficiency.to_json()},
            {"raised", memory_raised},
            {"raised_share", rate(memory_raised, memory_measured)},
            {"raised_median_ratio", opt(memory_raised_median_ratio)}}}};
}

std::vector<std::pair<std::string, std::optional<double>>> scalars(const Figures& f) {
  std::vector<std::pair<std::string, std::optional<double>>> out;
  const auto share = [](int num, int den) {
    return den > 0 ? std::optional<double>(ratio(num, den)) : std::nullopt;
  };
  out.emplace_back("tasks", f.tasks);
  out.emplace_back("compile_rate", share(f.compiled, f.tasks));
  out.emplace_back("correct_rate", share(f.correct, f.tasks));
  out.emplace_back("native_rate", share(f.native_ok, f.tasks));
  out.emplace_back("hidden_rate", share(f.hidden_ok, f.hidden_tasks));
  out.emplace_back("caught_by_hidden", f.caught_by_hidden);
  out.emplace_back("incorrect", f.incorrect);
  out.emplace_back("rejected", f.rejected);
  for (const auto& [name, s] : {std::pair{"tf32", &f.vs_tf32}, std::pair{"fp32", &f.vs_fp32}}) {
    for (const auto& [p, count] : s->fast) {
      out.emplace_back(fmt::format("fast_{:g}_{}", p, name), share(count, f.tasks));
    }
    out.emplace_back(fmt::format("geomean_{}", name), s->geomean.value);
    out.emplace_back(fmt::format("geomean_{}_ci_low", name), s->geomean.ci_low);
    out.emplace_back(fmt::format("geomean_{}_ci_high", name), s->geomean.ci_high);
    out.emplace_back(fmt::format("geomean_{}_fail1", name), s->geomean_failures_as_one.value);
    out.emplace_back(fmt::format("geomean_{}_fail1_ci_low", name),
                     s->geomean_failures_as_one.ci_low);
    out.emplace_back(fmt::format("geomean_{}_fail1_ci_high", name),
                     s->geomean_failures_as_one.ci_high);
    out.emplace_back(fmt::format("timed_{}", name), s->timed);
    out.emplace_back(fmt::format("wins_{}", name), s->wins);
    out.emplace_back(fmt::format("ties_{}", name), s->ties);
    out.emplace_back(fmt::format("losses_{}", name), s->losses);
  }
  out.emplace_back("memory_measured", f.memory_measured);
  out.emplace_back("memory_efficiency", f.memory_efficiency.value);
  out.emplace_back("memory_efficiency_ci_low", f.memory_efficiency.ci_low);
  out.emplace_back("memory_efficiency_ci_high", f.memory_efficiency.ci_high);
  out.emplace_back("memory_raised_share", share(f.memory_raised, f.memory_measured));
  out.emplace_back("memory_raised_median_ratio", f.memory_raised_median_ratio);
  return out;
}

json Group::to_json() const {
  return {{"key", key},
          {"figures", figures.to_json()},
          {"flagged_problems_left_out", flagged_left_out},
          {"best_of_n", best_of_n ? best_of_n->to_json() : json(nullptr)}};
}

json Section::to_json() const {
  json runs = json::array(), levels = json::array(), own = json::array();
  for (const auto& g : by_run) runs.push_back(g.to_json());
  for (const auto& g : by_level) levels.push_back(g.to_json());
  for (const auto& g : flagged) own.push_back(g.to_json());
  return {{"protocol", protocol},
          {"overall", overall.to_json()},
          {"by_run", runs},
          {"by_level", levels},
          {"flagged", own}};
}

json ProtocolComparison::to_json() const {
  json overall_j = json::object(), runs = json::object(), matrix = json::array();
  for (const auto& g : overall) overall_j[g.key] = g.to_json();
  for (const auto& [run, groups] : by_run) {
    for (const auto& g : groups) runs[run][g.key] = g.to_json();
  }
  for (const auto& [pair, count] : correct_in_a_not_b) {
    matrix.push_back({{"correct_in", pair.first}, {"not_in", pair.second}, {"count", count}});
  }
  return {{"protocols", protocols},
          {"common_candidates", common_candidates},
          {"overall", overall_j},
          {"by_run", runs},
          {"correct_in_a_not_b", matrix}};
}

json TaskRow::to_json() const {
  const auto o = [](const std::optional<int>& v) { return v ? json(*v) : json(nullptr); };
  return {{"run", run},
          {"protocol", protocol},
          {"level", o(level)},
          {"problem_id", o(problem_id)},
          {"problem", problem},
          {"sample", o(sample)},
          {"verdict", verdict},
          {"reason", reason},
          {"first_failing_family",
           first_failing_family.empty() ? json(nullptr) : json(first_failing_family)},
          {"flags", flags},
          {"speedup_vs_tf32", opt(speedup_tf32)},
          {"tie_vs_tf32", tie_tf32},
          {"speedup_vs_fp32", opt(speedup_fp32)},
          {"peak_ratio", opt(peak_ratio)},
          {"problem_flags", problem_flags},
          {"candidate_path", candidate_path}};
}

json HarnessErrorRow::to_json() const {
  json out = task.to_json();
  out["harness_fault"] = {{"kind", kind}, {"stage", stage}};
  return out;
}

bool is_harness_error(const json& result) { return verdict_of(result) == "harness_error"; }

json Report::to_json() const {
  json secs = json::array(), rows = json::array(), faults = json::array();
  for (const auto& s : sections) secs.push_back(s.to_json());
  for (const auto& t : tasks) rows.push_back(t.to_json());
  for (const auto& h : harness_errors) faults.push_back(h.to_json());
  json fast = json::array(), flagged_j = json::array();
  for (double p : options.fast_p) fast.push_back(p);
  for (const auto& [problem, why] : flagged) {
    flagged_j.push_back(
        {{"problem", problem}, {"why", why}, {"in_aggregates", options.include_flagged}});
  }
  return {{"schema", "kbv.report/1"},
          {"options",
           {{"memory_noise_band", options.memory_noise_band},
            {"confidence", options.confidence},
            {"resamples", options.resamples},
            {"seed", options.seed},
            {"fast_p", fast},
            {"include_flagged", options.include_flagged}}},
          {"results", results},
          {"sections", secs},
          {"protocols", protocols ? protocols->to_json() : json(nullptr)},
          {"flagged_problems", flagged_j},
          {"degenerate_problems", degenerate_problems},
          {"reference_fails_float64_problems", reference_fails_float64_problems},
          {"tasks", rows},
          {"harness_errors", faults}};
}

FlaggedProblems flagged_problems(const std::vector<json>& results) {
  std::map<std::string, std::set<std::string>> why;
  for (const auto& r : results) {
    if (is_harness_error(r)) continue;
    const json& problem = at(r, "problem");
    const json& degenerate = at(problem, "degenerate");
    if (degenerate.is_boolean() && degenerate.get<bool>()) {
      why[problem_label(r)].insert("problem_degenerate");
    }
    const json& unstable = at(at(problem, "audit"), "reference_fails_float64");
    if ((unstable.is_array() && !unstable.empty()) ||
        (unstable.is_boolean() && unstable.get<bool>())) {
      why[problem_label(r)].insert("reference_fails_float64");
    }
    for (const auto& flag : at(r, "flags")) {
      const std::string id = text(flag, "id");
      if (id == "problem_degenerate" || id == "reference_fails_float64") {
        why[problem_label(r)].insert(id);
      }
    }
  }
  FlaggedProblems out;
  for (const auto& [problem, ids] : why) out[problem].assign(ids.begin(), ids.end());
  return out;
}

Report build_report(const std::vector<json>& results, const Options& options) {
  return build_report(results, options, flagged_problems(results));
}

Report build_report(const std::vector<json>& results, const Options& options,
                    const FlaggedProblems& flagged) {
  Report report;
  report.options = options;
  report.results = static_cast<int>(results.size());
  // Per protocol: the results the figures are over, and those of flagged problems by problem.
  std::map<std::string, std::vector<const json*>> by_protocol;
  std::map<std::string, std::map<std::string, std::vector<const json*>>> flagged_by_protocol;
  for (const auto& r : results) {
    if (is_harness_error(r)) {
      // Not a verdict: in no figure, no group, no comparison, no task row; listed apart.
      const json& fault = at(r, "harness_fault");
      report.harness_errors.push_back(
          {task_row(r), text(fault, "kind", "internal"), text(fault, "stage")});
      continue;
    }
    TaskRow row = task_row(r);
    const std::string label = problem_label(r);
    auto f = flagged.find(label);
    if (f != flagged.end()) {
      row.problem_flags = f->second;
      report.flagged.insert(*f);
      flagged_by_protocol[protocol_of(r)][label].push_back(&r);
    }
    if (f == flagged.end() || options.include_flagged) {
      by_protocol[protocol_of(r)].push_back(&r);
    } else {
      by_protocol.try_emplace(protocol_of(r));  // a section even when every result is flagged
    }
    report.tasks.push_back(std::move(row));
  }
  for (const auto& [problem, why] : report.flagged) {
    for (const auto& id : why) {
      (id == "problem_degenerate" ? report.degenerate_problems
                                  : report.reference_fails_float64_problems)
          .push_back(problem);
    }
  }
  const auto order = [](const TaskRow& a, const TaskRow& b) {
    return std::tie(a.protocol, a.run, a.level, a.problem_id, a.problem, a.sample) <
           std::tie(b.protocol, b.run, b.level, b.problem_id, b.problem, b.sample);
  };
  std::stable_sort(report.tasks.begin(), report.tasks.end(), order);
  std::stable_sort(
      report.harness_errors.begin(), report.harness_errors.end(),
      [&](const HarnessErrorRow& a, const HarnessErrorRow& b) { return order(a.task, b.task); });
  for (const auto& [protocol, rs] : by_protocol) {
    Section s;
    s.protocol = protocol;
    s.overall = group_of("all", rs, options);
    s.by_run = groups_by(rs, run_of, options);
    s.by_level = groups_by(rs, level_key, options);
    auto own = flagged_by_protocol.find(protocol);
    if (own != flagged_by_protocol.end()) {
      for (const auto& [problem, members] : own->second) {
        s.flagged.push_back(group_of(problem, members, options));
        if (options.include_flagged) continue;
        // How many flagged problems each group leaves out.
        ++s.overall.flagged_left_out;
        for (auto* groups : {&s.by_run, &s.by_level}) {
          for (auto& g : *groups) {
            const auto key = groups == &s.by_run ? run_of : level_key;
            g.flagged_left_out += std::any_of(members.begin(), members.end(),
                                              [&](const json* r) { return key(*r) == g.key; });
          }
        }
      }
    }
    report.sections.push_back(std::move(s));
  }
  std::erase_if(by_protocol, [](const auto& entry) { return entry.second.empty(); });
  report.protocols = compare_protocols(by_protocol, options);
  return report;
}

}  // namespace kbv::report
