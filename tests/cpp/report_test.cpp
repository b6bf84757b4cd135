// `kbv report` and `kbv compare` against values computed by hand from a few synthetic results,
// each written out in the test (docs/reporting.md defines every figure).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/eval_summary.hpp"
#include "report/export.hpp"
#include "report/metrics.hpp"
#include "report/render.hpp"
#include "report/run_comparison.hpp"
#include "store/store.hpp"

namespace kbv::report {
namespace {

using nlohmann::json;

const std::vector<std::string> kVerifiedFamilies = {"native", "h1_native", "h2_mixed_sign",
                                                    "h3_wide_range", "h4_special"};

struct Spec {
  std::string run = "modelA";
  std::string problem = "19_ReLU";
  int level = 1, problem_id = 19, sample = 0;
  std::string verdict = "correct";
  std::optional<double> tf32, fp32, peak_ratio;
  bool tie = false;
  std::string protocol = "verified";
  std::vector<std::string> failing;                        // families that fail (the others pass)
  std::vector<std::pair<std::string, std::string>> flags;  // id, severity
  bool degenerate = false;
};

json speedup(std::optional<double> v, bool tie) {
  if (!v) return nullptr;
  // An interval +-10% around the value: a win above 1.1, a loss below 0.9.
  return {{"value", *v}, {"ci_low", *v * 0.9}, {"ci_high", *v * 1.1}, {"tie", tie}};
}

json make(const Spec& s) {
  const std::vector<std::string> families =
      s.protocol == "standard" ? std::vector<std::string>{"native"} : kVerifiedFamilies;
  json fams = json::array(), corr = json::object();
  const bool built = s.verdict != "compile_error";
  for (const auto& f : families) {
    fams.push_back({{"name", f}, {"draws", 3}});
    const bool fails = std::find(s.failing.begin(), s.failing.end(), f) != s.failing.end();
    if (built) {
      corr[f] = {{"draws", 3}, {"passed", fails ? 1 : 3}, {"evaluated", true}, {"ok", !fails}};
    }
  }
  json flags = json::array();
  for (const auto& [id, severity] : s.flags) {
    flags.push_back({{"id", id}, {"severity", severity}, {"detail", "test"}});
  }
  json memory = nullptr;
  if (s.peak_ratio) {
    memory = {{"candidate_peak_bytes", 1000.0 * *s.peak_ratio},
              {"reference_peak_bytes", 1000.0},
              {"peak_ratio", *s.peak_ratio}};
  }
  return {{"schema", "kbv.result/1"},
          {"verdict", s.verdict},
          {"reason", "because"},
          {"flags", flags},
          {"correctness", corr},
          {"speedup", {{"vs_tf32", speedup(s.tf32, s.tie)}, {"vs_fp32", speedup(s.fp32, false)}}},
          {"memory", memory},
          {"problem", {{"name", s.problem}, {"degenerate", s.degenerate}}},
          {"candidate", {{"path", "/runs/" + s.run + "/" + s.problem + ".py"}}},
          {"protocol", {{"name", s.protocol}, {"families", fams}}},
          {"environment", {{"device", "cuda"}}},
          {"_row",
           {{"run", s.run},
            {"problem", s.problem},
            {"level", s.level},
            {"problem_id", s.problem_id},
            {"sample", s.sample},
            {"key", "k"},
            {"finished_at", "2026-12-02T00:00:00Z"}}}};
}

Spec correct(std::string problem, double tf32, double fp32, std::optional<double> peak = {}) {
  Spec s;
  s.problem = std::move(problem);
  s.tf32 = tf32;
  s.fp32 = fp32;
  s.peak_ratio = peak;
  return s;
}

Spec failed(std::string problem, std::string verdict) {
  Spec s;
  s.problem = std::move(problem);
  s.verdict = std::move(verdict);
  return s;
}

int fast(const SpeedupFigures& s, double p) {
  for (const auto& [q, count] : s.fast) {
    if (q == p) return count;
  }
  ADD_FAILURE() << "no fast_" << p;
  return -1;
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Three correct kernels (speedups 2, 0.5, 1 vs TF32; 4, 1, 2 vs FP32), one incorrect, one
// that did not compile: five tasks.
std::vector<json> five_tasks() {
  Spec win = correct("a", 2, 4, 0.5), loss = correct("b", 0.5, 1, 1.0), tie = correct("c", 1, 2, 2);
  tie.tie = true;
  Spec wrong = failed("d", "incorrect");
  wrong.failing = {"h2_mixed_sign", "h3_wide_range"};
  return {make(win), make(loss), make(tie), make(wrong), make(failed("e", "compile_error"))};
}

TEST(ReportMetrics, GeomeanFastPAndRates) {
  const auto results = five_tasks();
  const Report r = build_report(results);
  ASSERT_EQ(r.sections.size(), 1u);
  EXPECT_FALSE(r.protocols.has_value());
  const Figures& f = r.sections[0].overall.figures;
  EXPECT_EQ(f.tasks, 5);
  EXPECT_EQ(f.compiled, 4);
  EXPECT_EQ(f.correct, 3);
  EXPECT_EQ(f.incorrect, 1);
  // geomean(2, 0.5, 1) = (2 * 0.5 * 1)^(1/3) = 1.
  EXPECT_EQ(f.vs_tf32.geomean.n, 3);
  EXPECT_NEAR(*f.vs_tf32.geomean.value, 1.0, 1e-12);
  EXPECT_LE(*f.vs_tf32.geomean.ci_low, 1.0);
  EXPECT_GE(*f.vs_tf32.geomean.ci_high, 1.0);
  // Failures as 1.0: (2 * 0.5 * 1 * 1 * 1)^(1/5) = 1.
  EXPECT_EQ(f.vs_tf32.geomean_failures_as_one.n, 5);
  EXPECT_NEAR(*f.vs_tf32.geomean_failures_as_one.value, 1.0, 1e-12);
  // vs FP32: (4 * 1 * 2)^(1/3) = 2; failures as 1.0: 8^(1/5).
  EXPECT_NEAR(*f.vs_fp32.geomean.value, 2.0, 1e-12);
  EXPECT_NEAR(*f.vs_fp32.geomean_failures_as_one.value, std::pow(8.0, 0.2), 1e-12);
  // fast_p counts correct kernels with speedup > p; the rate divides by all 5 tasks.
  EXPECT_EQ(fast(f.vs_tf32, 0), 3);
  EXPECT_EQ(fast(f.vs_tf32, 0.5), 2);  // 0.5 is not > 0.5
  EXPECT_EQ(fast(f.vs_tf32, 0.8), 2);
  EXPECT_EQ(fast(f.vs_tf32, 1), 1);  // 1 is not > 1
  EXPECT_EQ(fast(f.vs_tf32, 1.5), 1);
  EXPECT_EQ(fast(f.vs_tf32, 2), 0);
  EXPECT_EQ(fast(f.vs_fp32, 1), 2);
  const json j = f.to_json();
  EXPECT_DOUBLE_EQ(j["vs_tf32"]["fast_p"]["1"]["rate"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j["compile_rate"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["correct_rate"].get<double>(), 0.6);
  // Win [1.8, 2.2], loss [0.45, 0.55], tie (marked).
  EXPECT_EQ(f.vs_tf32.wins, 1);
  EXPECT_EQ(f.vs_tf32.ties, 1);
  EXPECT_EQ(f.vs_tf32.losses, 1);
}

TEST(ReportMetrics, FamiliesAndRejections) {
  const auto results = five_tasks();
  std::vector<json> all = results;
  Spec native_fail = failed("f", "incorrect");
  native_fail.failing = {"native", "h4_special"};
  Spec hack = failed("g", "rejected");
  hack.flags = {{"inputs_mutated", "reject"}, {"numerics_flags_changed", "warn"}};
  Spec hack2 = failed("h", "rejected");
  hack2.flags = {{"inputs_mutated", "reject"}, {"output_aliases_input", "reject"}};
  all.push_back(make(native_fail));
  all.push_back(make(hack));
  all.push_back(make(hack2));
  const Report report = build_report(all);
  const Figures& f = report.sections[0].overall.figures;
  EXPECT_EQ(f.tasks, 8);
  // The result JSON orders families by name; the protocol's order decides which failed first.
  EXPECT_EQ(first_failing_family(all[3]), "h2_mixed_sign");
  EXPECT_EQ(f.first_failing_family.at("h2_mixed_sign"), 1);
  EXPECT_EQ(f.first_failing_family.at("native"), 1);
  EXPECT_EQ(f.first_failing_family.size(), 2u);
  // Native passed everywhere but "f" and the uncompiled "e": 6 of 8.
  EXPECT_EQ(f.native_ok, 6);
  // Hidden families: the 3 correct and the 2 rejected (which passed every family): 5 of the 7
  // with results ("e" has none, but its protocol lists hidden families: 8 tasks).
  EXPECT_EQ(f.hidden_tasks, 8);
  EXPECT_EQ(f.hidden_ok, 5);
  EXPECT_EQ(f.caught_by_hidden, 1);  // "d": native ok, h2 and h3 failed
  EXPECT_EQ(f.rejected, 2);
  EXPECT_EQ(f.reject_flags.at("inputs_mutated"), 2);
  EXPECT_EQ(f.reject_flags.at("output_aliases_input"), 1);
  EXPECT_EQ(f.reject_flags.count("numerics_flags_changed"), 0u);  // a warning never rejects
}

TEST(ReportMetrics, FamilyOrderFollowsTheProtocol) {
  // kbv-paper has no family called "native": its first (paper_x1) is the native one.
  json r = {{"verdict", "incorrect"},
            {"protocol",
             {{"name", "kbv-paper"},
              {"families",
               {{{"name", "paper_x1"}},
                {{"name", "paper_x3"}},
                {{"name", "paper_x0.01"}},
                {{"name", "paper_neg1"}}}}}},
            {"correctness",
             {{"paper_x1", {{"ok", true}, {"evaluated", true}}},
              {"paper_x3", {{"ok", true}, {"evaluated", true}}},
              {"paper_x0.01", {{"ok", false}, {"evaluated", true}}},
              {"paper_neg1", {{"ok", false}, {"evaluated", true}}}}}};
  EXPECT_EQ(family_order(r),
            (std::vector<std::string>{"paper_x1", "paper_x3", "paper_x0.01", "paper_neg1"}));
  EXPECT_EQ(first_failing_family(r), "paper_x0.01");  // alphabetically paper_neg1 comes first
  // Without a protocol record: "native" first, then by name; unevaluated families are skipped.
  json bare = {{"correctness",
                {{"h1_native", {{"ok", false}, {"evaluated", false}}},
                 {"h2_mixed_sign", {{"ok", false}, {"evaluated", true}}},
                 {"native", {{"ok", true}, {"evaluated", true}}}}}};
  EXPECT_EQ(family_order(bare), (std::vector<std::string>{"native", "h1_native", "h2_mixed_sign"}));
  EXPECT_EQ(first_failing_family(bare), "h2_mixed_sign");
  const Report report = build_report({r});
  const Figures& f = report.sections[0].overall.figures;
  EXPECT_EQ(f.native_ok, 1);
  EXPECT_EQ(f.hidden_ok, 0);
  EXPECT_EQ(f.caught_by_hidden, 1);
}

TEST(ReportMetrics, FromTheStore) {
  // The row info the database adds (_row) is what groups the results; a missing level is null.
  const auto path = std::filesystem::path(testing::TempDir()) / "report_test.sqlite";
  std::filesystem::remove(path);
  {
    store::Store db(path);
    json a = make(correct("a", 2, 2));
    json b = make(failed("b", "incorrect"));
    a.erase("_row");
    b.erase("_row");
    db.put({"k1", "modelA", "a", 1, 1, 0}, a);
    db.put({"k2", "modelB", "b", std::nullopt, std::nullopt, std::nullopt}, b);
  }
  store::Store db(path);
  const Report r = build_report(db.results());
  ASSERT_EQ(r.sections.size(), 1u);
  ASSERT_EQ(r.sections[0].by_level.size(), 2u);
  EXPECT_EQ(r.sections[0].by_level[0].key, "level 1");
  EXPECT_EQ(r.sections[0].by_level[1].key, "level ?");
  EXPECT_EQ(r.sections[0].by_run[1].figures.incorrect, 1);
  std::filesystem::remove(path);
}

TEST(ReportMetrics, MemoryNoiseBandAndMedian) {
  // Peak ratios 1.04 (inside the 5% band), 1.2, 1.5, 0.8: two of four raise peak memory, by a
  // median of (1.2 + 1.5) / 2 = 1.35; efficiency = geomean of 1 / ratio.
  std::vector<json> rs = {make(correct("a", 1, 1, 1.04)), make(correct("b", 1, 1, 1.2)),
                          make(correct("c", 1, 1, 1.5)),  make(correct("d", 1, 1, 0.8)),
                          make(correct("e", 1, 1)),  // no memory measured: not counted
                          make(failed("f", "incorrect"))};
  const Report report = build_report(rs);
  const Figures& f = report.sections[0].overall.figures;
  EXPECT_EQ(f.memory_measured, 4);
  EXPECT_EQ(f.memory_raised, 2);
  EXPECT_NEAR(*f.memory_raised_median_ratio, 1.35, 1e-12);
  EXPECT_NEAR(*f.memory_efficiency.value, 1 / std::pow(1.04 * 1.2 * 1.5 * 0.8, 0.25), 1e-12);
  EXPECT_DOUBLE_EQ(f.to_json()["memory"]["raised_share"].get<double>(), 0.5);
  // The band is an option.
  Options wide;
  wide.memory_noise_band = 1.3;
  EXPECT_EQ(build_report(rs, wide).sections[0].overall.figures.memory_raised, 1);
}

TEST(ReportMetrics, EmptyInput) {
  const Report r = build_report({});
  EXPECT_EQ(r.results, 0);
  EXPECT_TRUE(r.sections.empty());
  EXPECT_FALSE(r.protocols.has_value());
  for (Format fmt : {Format::Markdown, Format::Json, Format::Csv, Format::Html}) {
    const std::string out = render(r, fmt);
    EXPECT_FALSE(out.empty());
    EXPECT_EQ(out.find("nan"), std::string::npos);
  }
  EXPECT_TRUE(json::parse(render(r, Format::Json)).is_object());
  const Figures empty;
  EXPECT_TRUE(empty.to_json()["correct_rate"].is_null());
  EXPECT_TRUE(empty.to_json()["vs_tf32"]["geomean"]["value"].is_null());
}

TEST(ReportMetrics, AllFailed) {
  std::vector<json> rs = {make(failed("a", "compile_error")), make(failed("b", "runtime_error")),
                          make(failed("c", "timeout"))};
  const Report r = build_report(rs);
  const Figures& f = r.sections[0].overall.figures;
  EXPECT_EQ(f.correct, 0);
  EXPECT_EQ(f.vs_tf32.geomean.n, 0);
  EXPECT_FALSE(f.vs_tf32.geomean.value.has_value());
  // Every failure counts as 1.0: exactly 1 with a degenerate interval.
  EXPECT_EQ(f.vs_tf32.geomean_failures_as_one.n, 3);
  EXPECT_DOUBLE_EQ(*f.vs_tf32.geomean_failures_as_one.value, 1.0);
  EXPECT_DOUBLE_EQ(*f.vs_tf32.geomean_failures_as_one.ci_low, 1.0);
  EXPECT_DOUBLE_EQ(*f.vs_tf32.geomean_failures_as_one.ci_high, 1.0);
  EXPECT_EQ(fast(f.vs_tf32, 0), 0);
  EXPECT_FALSE(f.memory_raised_median_ratio.has_value());
  const json j = r.to_json();
  const json& o = j["sections"][0]["overall"]["figures"];
  EXPECT_TRUE(o["vs_tf32"]["geomean"]["value"].is_null());
  EXPECT_TRUE(o["memory"]["raised_share"].is_null());
  EXPECT_DOUBLE_EQ(o["compile_rate"].get<double>(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(o["vs_tf32"]["fast_p"]["0"]["rate"].get<double>(), 0.0);
  for (Format fmt : {Format::Markdown, Format::Json, Format::Csv, Format::Html}) {
    EXPECT_EQ(render(r, fmt).find("nan"), std::string::npos);
  }
}

TEST(ReportMetrics, SingleSample) {
  const Report r = build_report({make(correct("a", 1.5, 3, 1.0))});
  const Group& g = r.sections[0].overall;
  EXPECT_FALSE(g.best_of_n.has_value());  // one sample per problem: no best-of-N figures
  EXPECT_DOUBLE_EQ(*g.figures.vs_tf32.geomean.value, 1.5);
  EXPECT_DOUBLE_EQ(*g.figures.vs_tf32.geomean.ci_low, 1.5);
  EXPECT_DOUBLE_EQ(*g.figures.vs_tf32.geomean.ci_high, 1.5);
  EXPECT_DOUBLE_EQ(*g.figures.memory_efficiency.value, 1.0);
  EXPECT_EQ(g.figures.memory_raised, 0);
  EXPECT_TRUE(g.to_json()["best_of_n"].is_null());
}

TEST(ReportMetrics, BestOfNPicksBestCorrectSampleWithItsMemory) {
  // Problem P: sample 0 correct 1.2x (peak ratio 2), sample 1 correct 3x (peak ratio 0.5),
  // sample 2 incorrect. Problem Q: sample 0 did not compile, sample 1 incorrect.
  Spec p0 = correct("P", 1.2, 1.2, 2.0), p1 = correct("P", 3, 3, 0.5),
       p2 = failed("P", "incorrect");
  p1.sample = 1;
  p2.sample = 2;
  p2.failing = {"native"};
  Spec q0 = failed("Q", "compile_error"), q1 = failed("Q", "incorrect");
  q1.sample = 1;
  q1.failing = {"h1_native"};
  const Report r = build_report({make(p0), make(p1), make(p2), make(q0), make(q1)});
  const Group& g = r.sections[0].overall;
  EXPECT_EQ(g.figures.tasks, 5);
  ASSERT_TRUE(g.best_of_n.has_value());
  const Figures& b = *g.best_of_n;
  EXPECT_EQ(b.tasks, 2);
  EXPECT_EQ(b.correct, 1);
  EXPECT_EQ(b.compiled, 2);  // Q's pick is the incorrect sample, which compiled
  EXPECT_EQ(b.incorrect, 1);
  EXPECT_EQ(b.first_failing_family.at("h1_native"), 1);
  EXPECT_DOUBLE_EQ(*b.vs_tf32.geomean.value, 3.0);
  EXPECT_EQ(fast(b.vs_tf32, 1), 1);
  // Memory from the same sample: efficiency 1 / 0.5 = 2, not raised.
  EXPECT_DOUBLE_EQ(*b.memory_efficiency.value, 2.0);
  EXPECT_EQ(b.memory_raised, 0);
  // Over every sample: 2 correct with geomean sqrt(1.2 * 3), one of two raises memory.
  EXPECT_NEAR(*g.figures.vs_tf32.geomean.value, std::sqrt(3.6), 1e-12);
  EXPECT_EQ(g.figures.memory_raised, 1);
}

TEST(ReportMetrics, GroupsByRunAndLevel) {
  Spec a = correct("a", 2, 2), b = correct("b", 2, 2), c = failed("c", "incorrect");
  b.run = "modelB";
  c.level = 2;
  const Report r = build_report({make(a), make(b), make(c)});
  const Section& s = r.sections[0];
  ASSERT_EQ(s.by_run.size(), 2u);
  EXPECT_EQ(s.by_run[0].key, "modelA");
  EXPECT_EQ(s.by_run[0].figures.tasks, 2);
  EXPECT_EQ(s.by_run[1].key, "modelB");
  ASSERT_EQ(s.by_level.size(), 2u);
  EXPECT_EQ(s.by_level[0].key, "level 1");
  EXPECT_EQ(s.by_level[0].figures.correct, 2);
  EXPECT_EQ(s.by_level[1].key, "level 2");
  EXPECT_EQ(s.by_level[1].figures.correct, 0);
  EXPECT_EQ(s.overall.figures.tasks, 3);
}

TEST(ReportMetrics, ProtocolsSideBySide) {
  // The same candidates P and Q under standard and verified; R only under standard.
  Spec sp = correct("P", 2, 2), sq = correct("Q", 2, 2), sr = correct("R", 2, 2);
  sp.protocol = sq.protocol = sr.protocol = "standard";
  Spec vp = correct("P", 2, 2), vq = failed("Q", "incorrect");
  vq.failing = {"h3_wide_range"};
  const Report r = build_report({make(sp), make(sq), make(sr), make(vp), make(vq)});
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.sections[0].protocol, "standard");
  EXPECT_EQ(r.sections[1].protocol, "verified");
  ASSERT_TRUE(r.protocols.has_value());
  const auto& pc = *r.protocols;
  EXPECT_EQ(pc.common_candidates, 2);
  EXPECT_EQ(pc.correct_in_a_not_b.at({"standard", "verified"}), 1);
  EXPECT_EQ(pc.correct_in_a_not_b.at({"verified", "standard"}), 0);
  ASSERT_EQ(pc.overall.size(), 2u);
  EXPECT_EQ(pc.overall[0].figures.tasks, 2);  // R is not common
  EXPECT_EQ(pc.overall[0].figures.correct, 2);
  EXPECT_EQ(pc.overall[1].figures.correct, 1);
  EXPECT_EQ(pc.overall[1].figures.first_failing_family.at("h3_wide_range"), 1);
  EXPECT_EQ(pc.by_run.at("modelA").size(), 2u);
  // Standard has only the native family: no hidden rate.
  EXPECT_TRUE(pc.overall[0].figures.to_json()["hidden_rate"].is_null());
  const std::string md = render(r, Format::Markdown);
  EXPECT_NE(md.find("Protocols side by side"), std::string::npos);
}

TEST(ReportMetrics, FlaggedProblemsListed) {
  Spec deg = correct("7_Const", 1, 1);
  deg.degenerate = true;
  Spec f64 = correct("9_Sum", 1, 1);
  f64.level = 2;
  f64.flags = {{"reference_fails_float64", "warn"}};
  const Report r = build_report({make(deg), make(f64), make(correct("a", 1, 1))});
  EXPECT_EQ(r.degenerate_problems, std::vector<std::string>{"level1/7_Const"});
  EXPECT_EQ(r.reference_fails_float64_problems, std::vector<std::string>{"level2/9_Sum"});
}

// The leaderboard's case (issue 19): a candidate returning cached zeros on a problem whose
// output is 0 for every input is `correct` at 19x. Flagged problems (degenerate, or a reference
// failing its float64 run) are left out of the headline figures, which are then the honest
// problem's alone. The flags are about the problem, so every result of a flagged problem is left
// out, also one that does not carry the flag (a sample that did not build).
std::vector<json> flagged_and_honest() {
  Spec zeros = correct("80_Gemm_Max_Subtract_GELU", 19, 25, 1.0);
  zeros.level = 2;
  zeros.problem_id = 80;
  zeros.degenerate = true;
  zeros.flags = {{"problem_degenerate", "warn"}};
  Spec unbuilt = failed("80_Gemm_Max_Subtract_GELU", "compile_error");  // no flag of its own
  unbuilt.level = 2;
  unbuilt.problem_id = 80;
  unbuilt.sample = 1;
  Spec unstable = correct("9_Sum", 7, 7, 1.0);
  unstable.problem_id = 9;
  unstable.flags = {{"reference_fails_float64", "warn"}};
  return {make(zeros), make(unbuilt), make(unstable), make(correct("19_ReLU", 1.31, 2.5, 1.0))};
}

TEST(ReportFlagged, FlaggedProblemsAreLeftOutOfTheHeadline) {
  const Report r = build_report(flagged_and_honest());
  ASSERT_EQ(r.sections.size(), 1u);
  const Figures& f = r.sections[0].overall.figures;
  // The honest problem stays in: one task, correct at 1.31x vs TF32.
  EXPECT_EQ(f.tasks, 1);
  EXPECT_EQ(f.compiled, 1);
  EXPECT_EQ(f.correct, 1);
  ASSERT_EQ(f.vs_tf32.geomean.n, 1);
  EXPECT_NEAR(*f.vs_tf32.geomean.value, 1.31, 1e-12);
  EXPECT_NEAR(*f.vs_fp32.geomean.value, 2.5, 1e-12);
  EXPECT_NEAR(*f.vs_tf32.geomean_failures_as_one.value, 1.31, 1e-12);
  EXPECT_EQ(fast(f.vs_tf32, 1), 1);
  EXPECT_EQ(fast(f.vs_tf32, 1.5), 0);
  EXPECT_EQ(f.memory_measured, 1);
  // Exactly the figures of a database holding the honest result alone, in every group.
  const Report honest = build_report({make(correct("19_ReLU", 1.31, 2.5, 1.0))});
  EXPECT_EQ(scalars(f), scalars(honest.sections[0].overall.figures));
  ASSERT_EQ(r.sections[0].by_level.size(), 1u);
  EXPECT_EQ(r.sections[0].by_level[0].key, "level 1");
  EXPECT_EQ(scalars(r.sections[0].by_level[0].figures), scalars(f));
  ASSERT_EQ(r.sections[0].by_run.size(), 1u);
  EXPECT_EQ(scalars(r.sections[0].by_run[0].figures), scalars(f));
  // Every result still has its row; the flagged problems are still named.
  EXPECT_EQ(r.tasks.size(), 4u);
  EXPECT_EQ(r.degenerate_problems, std::vector<std::string>{"level2/80_Gemm_Max_Subtract_GELU"});
  EXPECT_EQ(r.reference_fails_float64_problems, std::vector<std::string>{"level1/9_Sum"});
}

TEST(ReportFlagged, EveryFormatSaysSoAndListsThemWithTheirFigures) {
  const Report r = build_report(flagged_and_honest());
  const std::string note =
      "2 problems flagged degenerate or with a reference failing its float64 run are left out of "
      "the aggregates above; --include-flagged puts them back.";
  const std::string md = render(r, Format::Markdown);
  EXPECT_NE(md.find(note), std::string::npos);
  // Their own table: the zeros kernel's 19x is there, beside its problem.
  EXPECT_NE(md.find("| level2/80_Gemm_Max_Subtract_GELU | verified | problem_degenerate | 2 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("19.0"), std::string::npos);
  const std::string html = render(r, Format::Html);
  EXPECT_NE(html.find(note), std::string::npos);
  EXPECT_NE(html.find("level2/80_Gemm_Max_Subtract_GELU"), std::string::npos);
  const std::string csv = render(r, Format::Csv);
  EXPECT_NE(csv.find("verified,overall,all,all,1,1,1,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("verified,flagged_problem,level2/80_Gemm_Max_Subtract_GELU,all,2,0.5,0.5,"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("verified,flagged_problem,level1/9_Sum,all,1,1,1,"), std::string::npos);
  const json j = json::parse(render(r, Format::Json));
  EXPECT_EQ(j["options"]["include_flagged"], false);
  ASSERT_EQ(j["flagged_problems"].size(), 2u);
  EXPECT_EQ(j["flagged_problems"][0]["problem"], "level1/9_Sum");
  EXPECT_EQ(j["flagged_problems"][0]["why"], json({"reference_fails_float64"}));
  EXPECT_EQ(j["flagged_problems"][1]["why"], json({"problem_degenerate"}));
  EXPECT_EQ(j["flagged_problems"][1]["in_aggregates"], false);
  const json& own = j["sections"][0]["flagged"][1];
  EXPECT_EQ(own["key"], "level2/80_Gemm_Max_Subtract_GELU");
  EXPECT_EQ(own["figures"]["tasks"], 2);
  EXPECT_DOUBLE_EQ(own["figures"]["vs_tf32"]["geomean"]["value"].get<double>(), 19.0);
  EXPECT_EQ(j["sections"][0]["overall"]["figures"]["tasks"], 1);
}

TEST(ReportFlagged, EachGroupCountsWhatItLeavesOut) {
  const Report r = build_report(flagged_and_honest());
  const Section& s = r.sections[0];
  EXPECT_EQ(s.overall.flagged_left_out, 2);
  EXPECT_EQ(s.by_run[0].flagged_left_out, 2);    // modelA
  EXPECT_EQ(s.by_level[0].flagged_left_out, 1);  // level 1: 9_Sum (level 2 has nothing left)
  ASSERT_EQ(s.flagged.size(), 2u);
  EXPECT_EQ(s.flagged[0].key, "level1/9_Sum");
  EXPECT_EQ(s.flagged[1].figures.tasks, 2);
  EXPECT_EQ(s.flagged[1].figures.correct, 1);
  EXPECT_TRUE(s.flagged[1].best_of_n.has_value());  // two samples of it
  for (const auto& t : r.tasks) {
    EXPECT_EQ(t.problem_flags.empty(), t.problem == "19_ReLU") << t.problem;
  }
  EXPECT_EQ(r.flagged.at("level2/80_Gemm_Max_Subtract_GELU"),
            std::vector<std::string>{"problem_degenerate"});
  // A protocol whose every result is flagged still has its section, with nothing in its figures.
  const Report only = build_report({flagged_and_honest()[0]});
  ASSERT_EQ(only.sections.size(), 1u);
  EXPECT_EQ(only.sections[0].overall.figures.tasks, 0);
  EXPECT_FALSE(only.sections[0].overall.figures.vs_tf32.geomean.value.has_value());
  EXPECT_EQ(only.sections[0].flagged.size(), 1u);
  EXPECT_NE(render(only, Format::Markdown).find("puts it back."), std::string::npos);
  EXPECT_FALSE(render(only, Format::Html).empty());
  // The flag in the problem's audit alone (a result whose flags were not kept) is enough.
  json audited = make(correct("5_LayerNorm", 3, 3));
  audited["problem"]["audit"] = {{"reference_fails_float64", {"h3_wide_range-0"}}};
  EXPECT_EQ(flagged_problems({audited}).at("level1/5_LayerNorm"),
            std::vector<std::string>{"reference_fails_float64"});
  // Not flagged: an empty list of failing cases, degenerate false.
  audited["problem"]["audit"]["reference_fails_float64"] = json::array();
  EXPECT_TRUE(flagged_problems({audited}).empty());
}

TEST(ReportFlagged, IncludeFlaggedPutsThemBack) {
  Options o;
  o.include_flagged = true;
  const Report r = build_report(flagged_and_honest(), o);
  const Figures& f = r.sections[0].overall.figures;
  EXPECT_EQ(f.tasks, 4);
  EXPECT_EQ(f.correct, 3);
  EXPECT_NEAR(*f.vs_tf32.geomean.value, std::cbrt(19 * 7 * 1.31), 1e-12);
  EXPECT_EQ(fast(f.vs_tf32, 1.5), 2);
  EXPECT_EQ(r.sections[0].overall.flagged_left_out, 0);
  EXPECT_EQ(r.sections[0].by_level.size(), 2u);
  EXPECT_EQ(r.sections[0].flagged.size(), 2u);  // still listed with their own figures
  const std::string md = render(r, Format::Markdown);
  EXPECT_NE(md.find("2 problems flagged degenerate or with a reference failing its float64 run "
                    "are in the aggregates above (--include-flagged)"),
            std::string::npos)
      << md;
  const json j = json::parse(render(r, Format::Json));
  EXPECT_EQ(j["options"]["include_flagged"], true);
  EXPECT_EQ(j["flagged_problems"][0]["in_aggregates"], true);
  EXPECT_EQ(j["sections"][0]["overall"]["flagged_problems_left_out"], 0);
  EXPECT_NE(render(r, Format::Csv).find("verified,overall,all,all,4,"), std::string::npos);
  EXPECT_NE(render(r, Format::Html).find("are in the aggregates above"), std::string::npos);
}

TEST(ReportFlagged, CompareLeavesOutProblemsFlaggedOnEitherSide) {
  // A's zeros kernel does not carry the flag (an older database); B flags the problem. Both
  // sides leave it out, so that both are over the same problems; the honest problem stays.
  Spec zeros = correct("80_Gemm_Max_Subtract_GELU", 19, 25);
  zeros.level = 2;
  zeros.problem_id = 80;
  const std::vector<json> a = {make(zeros), make(correct("19_ReLU", 1.31, 2.5))};
  zeros.flags = {{"problem_degenerate", "warn"}};
  const std::vector<json> b = {make(zeros), make(correct("19_ReLU", 1.5, 2.5))};
  const Comparison c = compare(a, b);
  ASSERT_EQ(c.flagged.size(), 1u);
  EXPECT_EQ(c.matched, 1);
  EXPECT_EQ(c.matched_flagged, 1);
  EXPECT_EQ(c.same_verdict, 1);
  const auto figure = [](const GroupDiff& g, const std::string& name) {
    for (const auto& f : g.figures) {
      if (f.name == name) return f;
    }
    ADD_FAILURE() << name;
    return FigureDiff{};
  };
  ASSERT_EQ(c.groups[0].group_by, "overall");
  EXPECT_EQ(*figure(c.groups[0], "tasks").a, 1);
  EXPECT_EQ(*figure(c.groups[0], "tasks").b, 1);
  EXPECT_NEAR(*figure(c.groups[0], "geomean_tf32").a, 1.31, 1e-12);
  EXPECT_NEAR(*figure(c.groups[0], "geomean_tf32").b, 1.5, 1e-12);
  const GroupDiff& own = c.groups.back();
  EXPECT_EQ(own.group_by, "flagged_problem");
  EXPECT_EQ(own.key, "level2/80_Gemm_Max_Subtract_GELU");
  EXPECT_NEAR(*figure(own, "geomean_tf32").a, 19, 1e-12);
  const std::string note =
      "1 problem flagged degenerate or with a reference failing its float64 run in either "
      "database is left out of the aggregates above; --include-flagged puts it back.";
  const std::string md = render(c, Format::Markdown);
  EXPECT_NE(md.find(note), std::string::npos) << md;
  EXPECT_NE(md.find("| level2/80_Gemm_Max_Subtract_GELU | verified | problem_degenerate | 1 | 1 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("1 more candidate in both is of flagged problems"), std::string::npos);
  EXPECT_NE(render(c, Format::Html).find(note), std::string::npos);
  EXPECT_NE(render(c, Format::Csv)
                .find("verified,flagged_problem,level2/80_Gemm_Max_Subtract_GELU,all,geomean_tf32,"
                      "19,19,0"),
            std::string::npos);
  const json j = json::parse(render(c, Format::Json));
  EXPECT_EQ(j["flagged_problems"][0]["why"], json({"problem_degenerate"}));
  EXPECT_EQ(j["candidates"]["matched_flagged"], 1);
  // --include-flagged: both sides' figures hold it again.
  Options o;
  o.include_flagged = true;
  const Comparison with = compare(a, b, o);
  EXPECT_EQ(*figure(with.groups[0], "tasks").a, 2);
  EXPECT_EQ(with.matched, 2);
  EXPECT_NE(render(with, Format::Markdown).find("in either database is in the aggregates above"),
            std::string::npos);
}

// Speedups print with significant digits: a candidate 1,700x slower than its baseline is not
// "0.00x" (issue 19).
TEST(ReportRender, SlowSpeedupsKeepTheirDigits) {
  const Report r = build_report({make(correct("slow", 1.0 / 1700, 1.0 / 850, 1.0 / 1700))});
  const std::string md = render(r, Format::Markdown);
  EXPECT_NE(md.find("0.000588 [0.000588, 0.000588]"), std::string::npos) << md;
  EXPECT_NE(md.find("0.00118 [0.00118, 0.00118]"), std::string::npos);
  EXPECT_NE(md.find("1700 [1700, 1700]"), std::string::npos);  // memory: ref / cand peak
  const std::string html = render(r, Format::Html);
  EXPECT_NE(html.find("<td>0.000588</td>"), std::string::npos);
  EXPECT_NE(html.find("slow sample 0: 0.000588x"), std::string::npos);
  const Report protocols = build_report({make(correct("slow", 1.0 / 17000, 1, 1)), [] {
                                           Spec s = correct("slow", 1.0 / 17000, 1, 1);
                                           s.protocol = "standard";
                                           return make(s);
                                         }()});
  // The side-by-side scalars: four significant digits, not 5.882e-05.
  EXPECT_NE(render(protocols, Format::Markdown).find("| geomean_tf32 | 0.00005882 | 0.00005882 |"),
            std::string::npos);
}

// `kbv eval`'s summary: speedups, ratios and times with significant digits.
TEST(EvalSummary, SpeedupsKeepTheirDigits) {
  Result r;
  r.verdict = Verdict::Correct;
  r.reason = "matches";
  const auto time = [](double ms) {
    return json{{"median_ms", ms}, {"ci_low_ms", ms * 0.9}, {"ci_high_ms", ms * 1.1}, {"n", 10}};
  };
  r.timing = {
      {"candidate", time(1.7)}, {"baseline_tf32", time(0.001)}, {"baseline_fp32", time(32.7)}};
  r.speedup["vs_tf32"] = {
      {"value", 1.0 / 1700}, {"ci_low", 0.00055}, {"ci_high", 0.00062}, {"tie", false}};
  r.speedup["vs_fp32"] = {{"value", 19.24}, {"ci_low", 18.0}, {"ci_high", 20.5}, {"tie", false}};
  r.memory = {{"candidate_peak_bytes", 1024.0},
              {"reference_peak_bytes", 2048.0 * 1024 * 1024},
              {"peak_ratio", 1024.0 / (2048.0 * 1024 * 1024)}};
  const std::string s = summary(r);
  EXPECT_NE(s.find("vs TF32        0.000588x  [0.000550, 0.000620]"), std::string::npos) << s;
  EXPECT_NE(s.find("vs FP32        19.2x  [18.0, 20.5]"), std::string::npos) << s;
  EXPECT_NE(s.find("TF32 baseline  0.001000 ms  [0.0009000, 0.001100]"), std::string::npos) << s;
  EXPECT_NE(s.find("candidate      1.700 ms"), std::string::npos) << s;
  EXPECT_NE(s.find("(ratio 4.77e-07)"), std::string::npos) << s;
}

TEST(ReportMetrics, BootstrapIsDeterministicAndBracketsTheValue) {
  const std::vector<double> v = {0.5, 0.9, 1.1, 1.3, 2.0, 3.0, 0.7};
  const Options o;
  const Estimate a = geomean(v, o), b = geomean(v, o);
  EXPECT_EQ(*a.ci_low, *b.ci_low);
  EXPECT_EQ(*a.ci_high, *b.ci_high);
  EXPECT_LT(*a.ci_low, *a.value);
  EXPECT_GT(*a.ci_high, *a.value);
  Options other = o;
  other.seed = 7;
  EXPECT_NE(*geomean(v, other).ci_low, *a.ci_low);
  // Identical values: no spread to resample.
  const Estimate same = geomean({2, 2, 2, 2}, o);
  EXPECT_DOUBLE_EQ(*same.ci_low, 2.0);
  EXPECT_DOUBLE_EQ(*same.ci_high, 2.0);
  // Non-positive values are not averaged.
  EXPECT_EQ(geomean({0, -1}, o).n, 0);
}

TEST(ReportRender, HtmlIsSelfContained) {
  auto results = five_tasks();
  Spec other = correct("x", 1.3, 1.3, 0.9);
  other.run = "modelB";
  other.level = 2;
  results.push_back(make(other));
  const std::string html = render(build_report(results), Format::Html);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // One protocol, two runs: a scatter and a histogram per run.
  EXPECT_EQ(occurrences(html, "<svg"), 4u);
  EXPECT_EQ(occurrences(html, "</svg>"), 4u);
  EXPECT_NE(html.find("href=\"file:///runs/modelA/a.py\""), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(occurrences(html, "<table"), occurrences(html, "</table>"));
  EXPECT_EQ(occurrences(html, "<tr"), occurrences(html, "</tr>"));
}

TEST(ReportRender, HtmlHasProtocolBars) {
  Spec s = correct("P", 2, 2), v = correct("P", 2, 2);
  s.protocol = "standard";
  const std::string html = render(build_report({make(s), make(v)}), Format::Html);
  // Two sections of one run each (scatter + histogram) and the protocols' bars.
  EXPECT_EQ(occurrences(html, "<svg"), 5u);
  EXPECT_EQ(html.find("http://"), std::string::npos);
}

TEST(ReportRender, MarkdownCsvJson) {
  const Report r = build_report(five_tasks());
  const std::string md = render(r, Format::Markdown, GroupBy::Level);
  EXPECT_NE(md.find("| level |"), std::string::npos);
  EXPECT_NE(md.find("60.0% (3/5)"), std::string::npos);  // correct
  EXPECT_NE(md.find("20.0% (1/5)"), std::string::npos);  // fast_1 vs TF32
  const std::string csv = render(r, Format::Csv);
  // Header + run + level + overall rows.
  EXPECT_EQ(occurrences(csv, "\n"), 4u);
  EXPECT_EQ(csv.rfind("protocol,group_by,group,variant,tasks,", 0), 0u);
  EXPECT_NE(csv.find("verified,overall,all,all,5,0.8,0.6,"), std::string::npos);
  // Every row has the header's columns, best-of-N rows included.
  Spec second = correct("a", 3, 3);
  second.sample = 1;
  auto with_samples = five_tasks();
  with_samples.push_back(make(second));
  const std::string csv2 = render(build_report(with_samples), Format::Csv);
  EXPECT_NE(csv2.find("verified,overall,all,best_of_n,5,"), std::string::npos);
  size_t start = 0, columns = 0;
  for (size_t end = csv2.find('\n'); end != std::string::npos; end = csv2.find('\n', start)) {
    const size_t n = occurrences(csv2.substr(start, end - start), ",");
    if (start == 0) columns = n;
    EXPECT_EQ(n, columns);
    start = end + 1;
  }
  EXPECT_GT(columns, 40u);
  const json j = json::parse(render(r, Format::Json));
  EXPECT_EQ(j["schema"], "kbv.report/1");
  EXPECT_EQ(j["tasks"].size(), 5u);
  EXPECT_EQ(parse_format("md"), Format::Markdown);
  EXPECT_EQ(parse_format("pdf"), std::nullopt);
  EXPECT_EQ(parse_group_by("model"), GroupBy::Run);
  EXPECT_EQ(parse_group_by("level"), GroupBy::Level);
}

// A harness error (a fault of kbv, docs/result.md) in the database changes no figure: the report
// of five tasks plus one harness error has the five tasks' figures, and lists the fault apart.
json harness_error(std::string problem, std::string kind) {
  Spec s = failed(std::move(problem), "harness_error");
  json r = make(s);
  r["correctness"] = json::object();
  r["reason"] = "a fault of kbv itself (" + kind + ")";
  r["harness_fault"] = {{"kind", kind}, {"stage", "drawing the hidden cases"}, {"detail", "x"}};
  return r;
}

TEST(ReportHarnessErrors, LeftOutOfEveryFigureAndListed) {
  const auto five = five_tasks();
  auto with = five;
  with.push_back(harness_error("g", "reference_crashed"));
  with.push_back(harness_error("a", "disk_full"));  // beside a correct sample of the same problem
  const Report plain = build_report(five), r = build_report(with);
  EXPECT_EQ(r.results, 7);
  ASSERT_EQ(r.sections.size(), 1u);
  EXPECT_EQ(scalars(r.sections[0].overall.figures), scalars(plain.sections[0].overall.figures));
  EXPECT_EQ(r.sections[0].overall.figures.tasks, 5);
  EXPECT_FALSE(r.sections[0].overall.figures.verdicts.contains("harness_error"));
  EXPECT_EQ(r.tasks.size(), 5u);
  ASSERT_EQ(r.harness_errors.size(), 2u);
  EXPECT_EQ(r.harness_errors[0].kind, "disk_full");  // problem "a" sorts first
  EXPECT_EQ(r.harness_errors[1].task.problem, "g");
  EXPECT_EQ(r.harness_errors[1].stage, "drawing the hidden cases");
  const std::string md = render(r, Format::Markdown, GroupBy::Run);
  EXPECT_NE(md.find("2 harness errors"), std::string::npos);
  EXPECT_NE(md.find("## Harness errors"), std::string::npos);
  EXPECT_NE(md.find("| reference_crashed |"), std::string::npos);
  EXPECT_EQ(render(r, Format::Csv), render(plain, Format::Csv));
  EXPECT_EQ(json::parse(render(r, Format::Json))["harness_errors"].size(), 2u);
  EXPECT_NE(render(r, Format::Html).find("Harness errors"), std::string::npos);
  // Exports: KernelBench's files (figures) leave it out; JSON Lines keeps every row.
  size_t entries = 0;
  for (const auto& [file, content] : kernelbench_files(with)) {
    for (const auto& [id, samples] : content.items()) entries += samples.size();
  }
  EXPECT_EQ(entries, 5u);
  EXPECT_EQ(occurrences(json_lines(with), "\n"), 7u);
  // kbv compare: matched candidates and figures as without it; counted per side.
  const Comparison c = compare(five, with);
  EXPECT_EQ(c.matched, 5);
  EXPECT_EQ(c.same_verdict, 5);
  EXPECT_EQ(c.harness_errors_b.size(), 2u);
  for (const auto& f : c.groups[0].figures) {
    if (f.diff) EXPECT_EQ(*f.diff, 0) << f.name;
  }
  EXPECT_NE(render(c, Format::Markdown).find("Harness errors of B"), std::string::npos);
}

TEST(ReportCompare, SideBySideWithDifferences) {
  // A: 3 of 5 correct. B: the same five, with "d" now correct at 4x.
  const auto a = five_tasks();
  auto b = five_tasks();
  b[3] = make(correct("d", 4, 4));
  const Comparison c = compare(a, b, {}, "old", "new");
  ASSERT_FALSE(c.groups.empty());
  const GroupDiff& overall = c.groups[0];
  EXPECT_EQ(overall.group_by, "overall");
  EXPECT_TRUE(overall.in_a && overall.in_b);
  for (const auto& f : overall.figures) {
    if (f.name == "correct_rate") {
      EXPECT_DOUBLE_EQ(*f.a, 0.6);
      EXPECT_DOUBLE_EQ(*f.b, 0.8);
      EXPECT_NEAR(*f.diff, 0.2, 1e-12);
    }
    if (f.name == "geomean_tf32") {
      // geomean(2, 0.5, 1, 4) = 4^(1/4) = sqrt(2).
      EXPECT_NEAR(*f.b, std::sqrt(2.0), 1e-12);
    }
  }
  EXPECT_EQ(c.matched, 5);
  EXPECT_EQ(c.same_verdict, 4);
  EXPECT_EQ(c.correct_only_in_b, 1);
  EXPECT_EQ(c.correct_only_in_a, 0);
  const std::string html = render(c, Format::Html);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_NE(render(c, Format::Markdown).find("| correct_rate | 0.6 | 0.8 | +0.2 |"),
            std::string::npos);
  EXPECT_TRUE(json::parse(render(c, Format::Json)).is_object());
  // A group only one side has: the other side's figures are unset.
  const Comparison one_sided = compare(a, {}, {});
  EXPECT_TRUE(one_sided.groups[0].in_a);
  EXPECT_FALSE(one_sided.groups[0].in_b);
  EXPECT_FALSE(one_sided.groups[0].figures[0].b.has_value());
  const Comparison other_side = compare({}, a, {});
  EXPECT_FALSE(other_side.groups[0].in_a);
  EXPECT_EQ(other_side.groups[0].figures.size(), overall.figures.size());
  EXPECT_DOUBLE_EQ(*other_side.groups[0].figures[0].b, 5);
}

TEST(ReportCompare, AcrossProtocolsPairsStandardWithVerified) {
  // The same five candidates under standard (A) and verified (B): one protocol per database,
  // paired across them; "a" is caught by a hidden family under verified.
  std::vector<json> standard;
  for (const auto& r : five_tasks()) {
    json s = r;
    s["protocol"]["name"] = "standard";
    standard.push_back(s);
  }
  auto verified = five_tasks();
  Spec caught = failed("a", "incorrect");
  caught.failing = {"h3_wide_range"};
  verified[0] = make(caught);
  const Comparison c = compare(standard, verified, {}, "standard", "verified");
  EXPECT_EQ(c.protocol_a, "standard");
  EXPECT_EQ(c.protocol_b, "verified");
  ASSERT_FALSE(c.groups.empty());
  EXPECT_EQ(c.groups[0].protocol, "standard vs verified");
  EXPECT_TRUE(c.groups[0].in_a && c.groups[0].in_b);
  EXPECT_EQ(c.matched, 5);
  EXPECT_EQ(c.correct_only_in_a, 1);
  for (const auto& f : c.groups[0].figures) {
    if (f.name == "correct_rate") EXPECT_NEAR(*f.diff, -0.2, 1e-12);
  }
  EXPECT_NE(render(c, Format::Markdown).find("protocol standard in standard, verified in verified"),
            std::string::npos);
  EXPECT_EQ(json::parse(render(c, Format::Json))["protocols"]["b"], "verified");
  // One protocol on both sides: paired by protocol as before.
  EXPECT_TRUE(compare(five_tasks(), five_tasks()).protocol_a.empty());
}

}  // namespace
}  // namespace kbv::report
