// One case judged: the structure of the forward's answer, then every output against the golden
// outputs in two steps (the pass planned here, measured where the tensors are, decided here);
// and the run directory's tamper listing. The honest answer passes and raises nothing.
#include "judge/case_judge.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>

#include "check/measure.hpp"
#include "judge/run_dir_listing.hpp"
#include "tensor/view.hpp"

namespace kbv::judge {
namespace {
using nlohmann::json;
namespace fs = std::filesystem;

json case_spec(int outputs = 1) {
  return {{"id", "h1_native#0"}, {"outputs", outputs}, {"structure", "tensor"}};
}

json honest_run() {
  return {{"inputs_mutated", json::array()},
          {"outputs_aliasing_inputs", json::array()},
          {"structure", "tensor"},
          {"outputs", {{{"dtype", "float32"}, {"plain", true}, {"type", "Tensor"}}}}};
}

TEST(CaseStructure, AnHonestAnswerIsFine) {
  Findings out;
  EXPECT_FALSE(judge_structure(case_spec(), honest_run(), out).has_value());
  EXPECT_TRUE(out.flags().empty());
}

TEST(CaseStructure, AliasingAndSubclassesAreRejects) {
  Findings out;
  json run = honest_run();
  run["outputs_aliasing_inputs"] = {0};
  run["outputs"][0]["plain"] = false;
  run["outputs"][0]["type"] = "LazyTensor";
  EXPECT_FALSE(judge_structure(case_spec(), run, out).has_value());
  EXPECT_TRUE(out.has("output_aliases_input"));
  EXPECT_TRUE(out.has("output_not_plain_tensor"));
  // A reference that itself returns an input (a view) makes aliasing honest.
  Findings honest;
  json c = case_spec();
  c["reference_aliases_input"] = true;
  json aliasing = honest_run();
  aliasing["outputs_aliasing_inputs"] = {0};
  judge_structure(c, aliasing, honest);
  EXPECT_FALSE(honest.has("output_aliases_input"));
}

TEST(CaseStructure, WrongCountOrTypeIsAReason) {
  Findings out;
  json run = honest_run();
  run["structure"] = "sequence";
  run["outputs"].push_back(run["outputs"][0]);
  auto why = judge_structure(case_spec(), run, out);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("where the reference returns a tensor"), std::string::npos);
  json not_tensor = honest_run();
  not_tensor["outputs"] = {{{"type", "int"}}};
  EXPECT_EQ(*judge_structure(case_spec(), not_tensor, out), "output 0 is a int, not a tensor");
}

// What the reference's worker does for a case, on the host: each output's baseline (the TF32
// reference against the truth) when the case is drawn, then the planned pass over the slot.
struct ReferenceSide {
  std::vector<std::vector<double>> truth;
  json baselines() const {
    json out = json::array();
    for (const auto& t : truth) {
      auto view = tensor::flat_view(t.data(), tensor::DType::F64, static_cast<int64_t>(t.size()));
      out.push_back(check::describe_baseline(view, view).to_json());
    }
    return json{{"tf32", out}, {"fp32", out}};
  }
  // The judge answer for the slot's values.
  json measure(const json& passes, const std::vector<std::vector<double>>& slot) const {
    json outputs = json::array();
    for (const auto& p : passes) {
      const int i = p["index"];
      auto x = tensor::flat_view(slot[i].data(), tensor::DType::F64,
                                 static_cast<int64_t>(slot[i].size()));
      auto y = tensor::flat_view(truth[i].data(), tensor::DType::F64,
                                 static_cast<int64_t>(truth[i].size()));
      outputs.push_back(
          {{"index", i},
           {"measurement", check::measure(x, y, check::pass_spec_from_json(p["spec"])).to_json()}});
    }
    return outputs;
  }
};

json answer_for(const std::vector<std::vector<double>>& outputs, bool copied = true) {
  json run = honest_run();
  run["structure"] = outputs.size() == 1 ? "tensor" : "sequence";
  run["outputs"] = json::array();
  run["copied"] = json::array();
  for (const auto& o : outputs) {
    run["outputs"].push_back({{"dtype", "float64"},
                              {"shape", {o.size()}},
                              {"plain", true},
                              {"type", "torch.Tensor"},
                              {"device", "cpu"}});
    run["copied"].push_back(copied);
  }
  return run;
}

OutputsJudgement judged(const ReferenceSide& reference,
                        const std::vector<std::vector<double>>& slot, const json& run) {
  json c = {{"id", "h1_native-0"}, {"baselines", reference.baselines()}};
  auto plans = plan_outputs(c, run, "tf32", check::Policy::verified());
  return judge_outputs(plans, reference.measure(passes_of(plans), slot), check::Policy::verified());
}

TEST(CaseOutputs, ExactOutputPassesAndAWrongOneFailsWithItsIndex) {
  ReferenceSide reference{{{1.0, 2.0, 3.0, 4.0}, {1.0, 1.0, 1.0, 1.0}}};
  std::vector<std::vector<double>> slot = reference.truth;
  auto ok = judged(reference, slot, answer_for(slot));
  EXPECT_TRUE(ok.passed) << ok.reason;
  EXPECT_EQ(ok.outputs.size(), 2u);

  slot[1] = {1.0, 1.0, 5.0, 1.0};
  auto wrong = judged(reference, slot, answer_for(slot));
  EXPECT_FALSE(wrong.passed);
  EXPECT_TRUE(wrong.reason.starts_with("output 1: ")) << wrong.reason;
  EXPECT_NE(wrong.reason.find("normwise relative error 2 exceeds"), std::string::npos)
      << wrong.reason;
}

TEST(CaseOutputs, APassCarriesItsNormwiseBudgetForTheWorkersDeferredSensitivity) {
  // The reference worker measures a deferred sensitivity for an output over this budget
  // (protocol version 4): it must be the pass's own, before the sensitivity opens it.
  ReferenceSide reference{{{1.0, 2.0, 3.0, 4.0}}};
  json c = {{"id", "h1_native-0"}, {"baselines", reference.baselines()}};
  auto plans = plan_outputs(c, answer_for(reference.truth), "tf32", check::Policy::verified());
  const json passes = passes_of(plans);
  ASSERT_EQ(passes.size(), 1u);
  ASSERT_TRUE(plans[0].pass.has_value());
  EXPECT_GT(plans[0].pass->norm_budget, 0.0);
  EXPECT_EQ(passes[0].at("norm_budget").get<double>(), plans[0].pass->norm_budget);
  // Allclose has no normwise budget: none is sent.
  auto allclose =
      plan_outputs(c, answer_for(reference.truth), "tf32", check::Policy::allclose(1e-4, 1e-4));
  EXPECT_FALSE(passes_of(allclose)[0].contains("norm_budget"));
}

TEST(CaseOutputs, MissingMismatchedOrUncopiedOutputsFailWithoutAMeasurement) {
  ReferenceSide reference{{{1.0, 2.0}}};
  json c = {{"id", "h1_native-0"}, {"baselines", reference.baselines()}};
  json none = answer_for({});
  auto missing = plan_outputs(c, none, "tf32", check::Policy::verified());
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_FALSE(missing[0].pass.has_value());
  EXPECT_EQ(missing[0].why_not, "output 0 is missing");
  EXPECT_TRUE(passes_of(missing).empty());
  auto outcome = judge_outputs(missing, json::array(), check::Policy::verified());
  EXPECT_FALSE(outcome.passed);
  EXPECT_EQ(outcome.reason, "output 0 is missing");

  json other_shape = answer_for({{1.0, 2.0, 3.0}});
  auto shape = plan_outputs(c, other_shape, "tf32", check::Policy::verified());
  EXPECT_NE(shape[0].why_not.find("shape [3] differs from the reference's [2]"), std::string::npos)
      << shape[0].why_not;

  json other_dtype = answer_for({{1.0, 2.0}});
  other_dtype["outputs"][0]["dtype"] = "float16";
  auto dtype = plan_outputs(c, other_dtype, "tf32", check::Policy::verified());
  EXPECT_NE(dtype[0].why_not.find("dtype float16 differs"), std::string::npos) << dtype[0].why_not;

  json not_copied = answer_for({{1.0, 2.0}}, /*copied=*/false);
  auto uncopied = plan_outputs(c, not_copied, "tf32", check::Policy::verified());
  EXPECT_NE(uncopied[0].why_not.find("could not be taken for judging"), std::string::npos);
}

TEST(CaseOutputs, AMissingBaselineOrMeasurementIsKbvsFault) {
  json c = {{"id", "h1_native-0"}, {"baselines", {{"fp32", json::array()}}}};
  EXPECT_THROW(plan_outputs(c, answer_for({{1.0}}), "tf32", check::Policy::verified()),
               std::exception);
  ReferenceSide reference{{{1.0, 2.0}}};
  json ok = {{"id", "x"}, {"baselines", reference.baselines()}};
  auto plans = plan_outputs(ok, answer_for({{1.0, 2.0}}), "tf32", check::Policy::verified());
  EXPECT_THROW(judge_outputs(plans, json::array(), check::Policy::verified()), std::runtime_error);
}

TEST(CaseOutputs, InputsChangedInPlaceAreRejectsNamedByPosition) {
  Findings out;
  flag_mutated_inputs("h2_mixed_sign-1", json::array({0, 2}), out);
  ASSERT_TRUE(out.has("inputs_mutated"));
  Findings none;
  flag_mutated_inputs("h2_mixed_sign-1", json::array(), none);
  EXPECT_TRUE(none.flags().empty());
}

TEST(CaseOutputs, FamilyKeepsTheWorstFigures) {
  FamilyResult fam;
  add_case_to_family(
      fam, {{"passed", true},
            {"outputs",
             {{{"candidate", {{"max_abs", 0.5}, {"max_rel", 0.1}, {"normwise_rel", 0.01}}}}}}});
  add_case_to_family(
      fam, {{"passed", false},
            {"outputs",
             {{{"candidate", {{"max_abs", 0.2}, {"max_rel", 0.3}, {"normwise_rel", 0.02}}}}}}});
  EXPECT_EQ(fam.passed, 1);
  EXPECT_EQ(fam.cases.size(), 2u);
  EXPECT_DOUBLE_EQ(fam.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(fam.max_rel, 0.3);
  EXPECT_DOUBLE_EQ(fam.normwise_rel, 0.02);
  EXPECT_FALSE(fam.elem_margin.has_value());  // no output judged by the scaled policy
}

TEST(CaseOutputs, FamilyKeepsTheLargestMargins) {
  FamilyResult fam;
  const auto outcome = [](double elem, double norm) {
    return json{{"passed", true},
                {"outputs",
                 {{{"candidate", json::object()},
                   {"margins", {{"elementwise", elem}, {"normwise", norm}}}}}}};
  };
  add_case_to_family(fam, outcome(0.3, 0.9));
  add_case_to_family(fam, outcome(0.7, 0.2));
  ASSERT_TRUE(fam.elem_margin && fam.norm_margin);
  EXPECT_DOUBLE_EQ(*fam.elem_margin, 0.7);
  EXPECT_DOUBLE_EQ(*fam.norm_margin, 0.9);
}

TEST(RunDirListing, UnchangedIsCleanAndEveryChangeIsNamed) {
  auto dir = fs::temp_directory_path() /
             ("kbv-listing-" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (const char* sub : {"inputs", "state", "golden"}) fs::create_directories(dir / sub);
  std::ofstream(dir / "inputs" / "a.safetensors") << "aaaa";
  std::ofstream(dir / "golden" / "g.safetensors") << "gggg";
  auto before = list_run_dir(dir);
  std::ofstream(dir / "reference.log") << "the log grows";  // logs are not evidence
  EXPECT_TRUE(changed_entries(before, list_run_dir(dir)).empty());
  std::ofstream(dir / "golden" / "g.safetensors") << "gggggggg";  // rewritten, other size
  std::ofstream(dir / "planted") << "x";
  fs::remove(dir / "inputs" / "a.safetensors");
  auto changed = changed_entries(before, list_run_dir(dir));
  std::sort(changed.begin(), changed.end());
  EXPECT_EQ(changed,
            (std::vector<std::string>{"golden/g.safetensors", "inputs/a.safetensors", "planted"}));
  fs::remove_all(dir);
}

TEST(RunDirListing, ADirectoryThatCannotBeReadIsSaidToBeIncomplete) {
  auto dir = fs::temp_directory_path() /
             ("kbv-listing-read-" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  fs::create_directories(dir);
  std::ofstream(dir / ".kbv-owner") << "1";
  bool complete = true;
  auto listed = list_run_dir(dir, &complete);
  EXPECT_TRUE(complete);  // no inputs/state/golden folders: nothing kept there, not a failure
  EXPECT_EQ(listed.size(), 1u);
  fs::remove_all(dir);
  // Gone (or unreadable): every entry looks removed, and the listing says it could not look.
  EXPECT_FALSE(changed_entries(listed, list_run_dir(dir, &complete)).empty());
  EXPECT_FALSE(complete);
}

}  // namespace
}  // namespace kbv::judge
