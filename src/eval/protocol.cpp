#include "eval/protocol.hpp"

#include <stdexcept>

namespace kbv::eval {

nlohmann::json Protocol::to_json() const {
  nlohmann::json fams = nlohmann::json::array();
  for (const auto& f : families) fams.push_back({{"name", f.name}, {"draws", f.draws}});
  return {{"name", name},
          {"version", version},
          {"families", fams},
          {"timing_families", timing_families},
          {"tolerance", policy.to_json()},
          {"judged_against",
           policy.kind == check::PolicyKind::Scaled ? "float64_truth" : reference_variant},
          {"parameters_redrawn", redraw_parameters},
          {"headline_baseline", headline == Headline::Tf32 ? "tf32" : "fp32"},
          {"description", description}};
}

std::vector<std::string> protocol_names() { return {"verified", "kbv-paper", "standard"}; }

Protocol protocol_by_name(const std::string& name, int hidden_draws) {
  Protocol p;
  p.name = name;
  if (name == "verified") {
    p.families = {{"native", 1},
                  {"h1_native", hidden_draws},
                  {"h2_mixed_sign", hidden_draws},
                  {"h3_wide_range", hidden_draws},
                  {"h4_special", hidden_draws}};
    p.timing_families = {"h1_native"};
    // 5: where the sensitivity opens the normwise budget, the elements it does not open keep a
    // budget over their own norm of at least 4x the TF32 reference's own error over them, not
    // over every element (check::Policy::conditioned_budget_by_reference): the reference's own
    // copy of KernelBench's 49_Mamba2ReturnFinalState failed version 4's rule on the H100.
    // 4: the normwise budget is opened by the rounding sensitivity's own normwise figure
    // (check::Policy::sens_norm_multiplier), and the sensitivity is eight runs with normal
    // perturbations, not two with random signs: an honest TF32 convolution failed the normwise
    // floor on the H100, and two runs' elementwise budgets failed an emulated TF32 kernel on
    // wide-range draws (docs/elementwise-budget.md).
    // 3: where the TF32 reference is itself over the elementwise budget on a case, a candidate
    // may be too, within 4x the reference's own excess (check::Policy::admit_reference_excess;
    // 16 of KernelBench's last 84 references failed themselves under 2 on the H200).
    // 2: each element's budget follows its own rounding sensitivity (issue 19; 1 was 4x the
    // TF32 baseline's worst element on the draw). Results say which rule judged them.
    p.version = 5;
    p.policy = check::Policy::verified();
    p.description =
        "kbv: TF32 baseline, native plus four hidden input families under a secret seed, "
        "parameters re-drawn, float64 truth with a TF32-level budget scaled to the output";
  } else if (name == "kbv-paper") {
    p.families = {{"paper_x1", 1}, {"paper_x3", 1}, {"paper_x0.01", 1}, {"paper_neg1", 1}};
    p.timing_families = {"paper_x1"};
    p.policy = check::Policy::allclose(1e-3, 1e-3);
    p.redraw_parameters = false;
    p.description =
        "published KernelBench-Verified: TF32 baseline, native inputs scaled x1, x3, x0.01, "
        "x-1, allclose atol=rtol=1e-3 against the TF32 reference";
  } else if (name == "standard") {
    p.families = {{"native", 5}};
    p.timing_families = {"native"};
    p.policy = check::Policy::allclose(1e-4, 1e-4);
    p.reference_variant = "fp32";
    p.redraw_parameters = false;
    p.headline = Headline::Fp32;
    p.description =
        "KernelBench: FP32 baseline, native inputs, 5 trials, allclose atol=rtol=1e-4 against "
        "the FP32 reference";
  } else {
    throw std::invalid_argument("unknown protocol '" + name +
                                "' (known: verified, kbv-paper, standard)");
  }
  return p;
}

}  // namespace kbv::eval
