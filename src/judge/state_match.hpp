// Matching the reference's parameters and buffers to the candidate's, so both run with the same
// values when the hidden families re-draw them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kbv::judge {

struct StateMatch {
  std::map<std::string, std::string> mapping;    // reference name -> candidate name
  std::vector<std::string> unmatched_reference;  // floating-point tensors left out
  std::vector<std::string> renamed;              // matched by a unique shape, not by name
};

// `reference` and `candidate` are state specs: {name: {"shape": [...], "dtype": "float32"}}.
// Same name, shape and dtype first; then a reference tensor whose (shape, dtype) is unique on
// both sides maps to the candidate's one tensor of that kind. Anything else stays unmatched:
// it is not re-drawn, so both sides keep the values their seeded construction gave them.
StateMatch match_state(const nlohmann::json& reference, const nlohmann::json& candidate);

}  // namespace kbv::judge
