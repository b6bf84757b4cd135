#include "judge/state_match.hpp"

#include <set>

namespace kbv::judge {
namespace {

using Kind = std::pair<std::string, std::string>;  // (shape, dtype) as text

Kind kind_of(const nlohmann::json& info) {
  return {info.at("shape").dump(), info.at("dtype").get<std::string>()};
}

std::map<Kind, std::vector<std::string>> group_by_kind(const nlohmann::json& spec,
                                                       const std::set<std::string>& taken) {
  std::map<Kind, std::vector<std::string>> groups;
  for (const auto& [name, info] : spec.items()) {
    if (!taken.count(name)) groups[kind_of(info)].push_back(name);
  }
  return groups;
}

bool is_floating(const nlohmann::json& info) {
  auto dtype = info.at("dtype").get<std::string>();
  return dtype.starts_with("float") || dtype == "bfloat16" || dtype == "half";
}

}  // namespace

StateMatch match_state(const nlohmann::json& reference, const nlohmann::json& candidate) {
  StateMatch result;
  std::set<std::string> taken_reference, taken_candidate;
  for (const auto& [name, info] : reference.items()) {
    if (candidate.contains(name) && kind_of(candidate[name]) == kind_of(info)) {
      result.mapping[name] = name;
      taken_reference.insert(name);
      taken_candidate.insert(name);
    }
  }
  auto reference_left = group_by_kind(reference, taken_reference);
  auto candidate_left = group_by_kind(candidate, taken_candidate);
  for (const auto& [kind, names] : reference_left) {
    auto it = candidate_left.find(kind);
    if (names.size() == 1 && it != candidate_left.end() && it->second.size() == 1) {
      result.mapping[names[0]] = it->second[0];
      result.renamed.push_back(names[0] + " -> " + it->second[0]);
      taken_reference.insert(names[0]);
    }
  }
  for (const auto& [name, info] : reference.items()) {
    if (!taken_reference.count(name) && is_floating(info)) {
      result.unmatched_reference.push_back(name);
    }
  }
  return result;
}

}  // namespace kbv::judge
