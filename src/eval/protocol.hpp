// Named evaluation protocols, so one command reproduces KernelBench's numbers, the published
// KernelBench-Verified numbers, and kbv's own (DESIGN.md, "The protocol").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check/compare.hpp"

namespace kbv::eval {

struct FamilySpec {
  std::string name;
  int draws = 1;
};

enum class Headline { Tf32, Fp32 };  // which baseline the headline speedup is against

struct Protocol {
  std::string name;
  int version = 1;
  std::vector<FamilySpec> families;
  std::vector<std::string> timing_families;  // whose inputs the timed calls rotate through
  check::Policy policy;
  // Which golden output the candidate's dtype/shape contract and AllClose compare against.
  std::string reference_variant = "tf32";
  bool redraw_parameters = true;
  Headline headline = Headline::Tf32;
  std::string description;
  nlohmann::json to_json() const;
  // The outputs the reference keeps to judge candidates by: the float64 truth under the scaled
  // policy, the reference variant under allclose.
  std::string judged_by() const {
    return policy.kind == check::PolicyKind::Scaled ? "truth" : reference_variant;
  }
};

// Throws std::invalid_argument naming the known protocols.
Protocol protocol_by_name(const std::string& name, int hidden_draws = 3);
std::vector<std::string> protocol_names();

}  // namespace kbv::eval
