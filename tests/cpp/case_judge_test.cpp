// One case judged: the structure of the forward's answer, then every output against the golden
// outputs; and the run directory's tamper listing. The honest answer passes and raises nothing.
#include "judge/case_judge.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>

#include "judge/run_dir_listing.hpp"

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

TEST(CaseStructure, MutationAliasingAndSubclassesAreRejects) {
  Findings out;
  json run = honest_run();
  run["inputs_mutated"] = {0};
  run["outputs_aliasing_inputs"] = {0};
  run["outputs"][0]["plain"] = false;
  run["outputs"][0]["type"] = "LazyTensor";
  EXPECT_FALSE(judge_structure(case_spec(), run, out).has_value());
  EXPECT_TRUE(out.has("inputs_mutated"));
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

// Named F64 tensors backed by vectors.
struct Tensors {
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, tensor::TensorView> views;
  void put(const std::string& name, std::vector<double> v) {
    values[name] = std::move(v);
    auto& data = values[name];
    views[name] = {name,
                   tensor::DType::F64,
                   {static_cast<int64_t>(data.size())},
                   reinterpret_cast<const std::byte*>(data.data()),
                   data.size() * sizeof(double)};
  }
  TensorLookup lookup() const {
    return [this](std::string_view name) -> const tensor::TensorView* {
      auto it = views.find(std::string(name));
      return it == views.end() ? nullptr : &it->second;
    };
  }
};

TEST(CaseOutputs, ExactOutputPassesAndAWrongOneFailsWithItsIndex) {
  Tensors golden;
  golden.put("tf32.out0", {1.0, 2.0, 3.0, 4.0});
  golden.put("truth.out0", {1.0, 2.0, 3.0, 4.0});
  golden.put("tf32.out1", {1.0, 1.0, 1.0, 1.0});
  golden.put("truth.out1", {1.0, 1.0, 1.0, 1.0});
  Tensors cand;
  cand.put("candidate.out0", {1.0, 2.0, 3.0, 4.0});
  cand.put("candidate.out1", {1.0, 1.0, 1.0, 1.0});
  auto ok = judge_outputs(cand.lookup(), golden.lookup(), 2, "tf32", check::Policy::verified());
  EXPECT_TRUE(ok.passed) << ok.reason;
  EXPECT_EQ(ok.outputs.size(), 2u);

  cand.put("candidate.out1", {1.0, 1.0, 5.0, 1.0});
  auto wrong = judge_outputs(cand.lookup(), golden.lookup(), 2, "tf32", check::Policy::verified());
  EXPECT_FALSE(wrong.passed);
  EXPECT_TRUE(wrong.reason.starts_with("output 1: ")) << wrong.reason;
}

TEST(CaseOutputs, AMissingCandidateOutputFailsAMissingGoldenIsKbvsFault) {
  Tensors golden;
  golden.put("tf32.out0", {1.0});
  golden.put("truth.out0", {1.0});
  Tensors none;
  auto missing =
      judge_outputs(none.lookup(), golden.lookup(), 1, "tf32", check::Policy::verified());
  EXPECT_FALSE(missing.passed);
  EXPECT_EQ(missing.reason, "output 0 is missing");
  EXPECT_THROW(
      judge_outputs(none.lookup(), Tensors{}.lookup(), 1, "tf32", check::Policy::verified()),
      std::runtime_error);
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

}  // namespace
}  // namespace kbv::judge
