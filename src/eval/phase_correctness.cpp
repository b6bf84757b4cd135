// Correctness: every hidden case through the candidate, judged against its golden outputs, and
// the re-checks of a candidate that passed them all.
#include <fmt/format.h>

#include "eval/phases.hpp"
#include "judge/case_judge.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;
using orchestrate::worker_request;
namespace cmd = orchestrate::cmd;

namespace {

FamilyResult& family_of(std::vector<FamilyResult>& families, const std::string& name) {
  for (auto& f : families) {
    if (f.family == name) return f;
  }
  FamilyResult f;
  f.family = name;
  families.push_back(f);
  return families.back();
}

// The candidate's `run_case` on case `c`, saving its outputs to `output`.
json run_case_request(const json& c, const fs::path& output) {
  return worker_request(cmd::kRunCase, {{"inputs", c["inputs"]},
                                        {"state", c["state"]},
                                        {"output", output.string()},
                                        {"max_output_bytes", CaseFiles::output_limit({&c})}});
}

}  // namespace

bool CorrectnessRecord::all_passed() const {
  for (const auto& f : families) {
    if (!f.ok()) return false;
  }
  return true;
}

CorrectnessRecord check_correctness(CandidateSide& side, const json& cases) {
  CorrectnessRecord out;
  for (const auto& spec : side.protocol.families) {
    family_of(out.families, spec.name).draws = spec.draws;
  }
  int index = 0;
  for (const auto& c : cases) {
    ++index;
    const std::string id = c["id"].get<std::string>();
    side.say(fmt::format("checking {} ({}/{})", id, index, cases.size()));
    auto output = side.files.output_of(c);
    auto response = side.workers.candidate(run_case_request(c, output));
    auto& fam = family_of(out.families, c["family"].get<std::string>());
    fam.evaluated = true;
    if (!response.ok()) {
      out.failed = judge::call_failure(
          response, fmt::format("the forward on {} inputs", c["family"].get<std::string>()));
      return out;
    }
    side.calls.forward(response.result, id, side.findings);
    // Structure first (count, type, aliasing, input mutation), then every output's figures.
    json outcome = {{"id", c["id"]}, {"draw", c["draw"]}, {"passed", false}};
    outcome["outputs"] = json::array();
    if (auto wrong = judge::judge_structure(c, response.result, side.findings)) {
      outcome["reason"] = *wrong;
    } else {
      auto judged = CaseFiles::judge(c, output, side.protocol, side.findings);
      outcome["outputs"] = judged.outputs;
      outcome["passed"] = judged.passed;
      outcome["truth"] = c["truth"];
      if (!judged.passed) outcome["reason"] = judged.reason;
    }
    judge::add_case_to_family(fam, outcome);
  }
  return out;
}

//  1. determinism: case A again on fresh buffers; it must pass again (bitwise differences within
//     the budget are fine: atomics);
//  2. fresh values in reused buffers: case B's values written into the very tensor objects of
//     run 1 (same addresses, same `_version`), with B's state; must match B's golden;
//  3. reused values in fresh buffers: case A's values in new tensors; must match A's golden.
// The candidate only writes outputs; the golden outputs never leave this process's view.
RecheckRecord run_rechecks(CandidateSide& side, const json& cases) {
  RecheckRecord out;
  if (cases.empty()) return out;
  side.say("re-checking: determinism, caching, operator trace");
  const json& a = cases[0];
  const json& b = cases.size() > 1 ? cases[1] : cases[0];
  const std::string a_id = a["id"].get<std::string>(), b_id = b["id"].get<std::string>();
  auto run = [&](const json& c, const std::string& tag,
                 const json& extra) -> std::optional<fs::path> {
    const std::string id = c["id"].get<std::string>();
    auto output = side.files.output_of(c, tag);
    json request = run_case_request(c, output);
    request.update(extra);
    auto response = side.workers.candidate(request);
    if (!response.ok()) {
      out.failed = judge::call_failure(response, fmt::format("a re-check ({}) on {}", tag, id));
      return std::nullopt;
    }
    side.calls.forward(response.result, id + " (" + tag + ")", side.findings);
    for (int index : response.result["inputs_mutated"]) {
      side.findings.add("inputs_mutated", Severity::Reject,
                        fmt::format("the forward changed input {} in place on a re-check", index));
    }
    return output;
  };

  auto repeat = run(a, "repeat", {{"keep", "recheck"}});
  if (!repeat) return out;
  auto repeated = CaseFiles::judge(a, *repeat, side.protocol, side.findings);
  auto first = side.files.output_of(a);
  bool bitwise = fs::exists(first) && CaseFiles::same_bytes(first, *repeat, side.findings);
  out.record["determinism"] = {
      {"case", a["id"]}, {"passed", repeated.passed}, {"bitwise_equal", bitwise}};
  if (!repeated.passed) {
    side.findings.add(
        "nondeterministic", Severity::Reject,
        fmt::format("{} passed once and failed when run again: {}", a_id, repeated.reason));
  }

  auto reused = run(b, "same-buffers", {{"reuse", "recheck"}});
  if (!reused) return out;
  auto in_reused = CaseFiles::judge(b, *reused, side.protocol, side.findings);
  out.record["fresh_values_in_reused_buffers"] = {{"case", b["id"]}, {"passed", in_reused.passed}};
  if (!in_reused.passed) {
    side.findings.add("output_cached", Severity::Reject,
                      fmt::format("with {}'s values written into the same input tensors (same "
                                  "addresses and versions) the output is wrong: {}; the plain "
                                  "check of {} passed",
                                  b_id, in_reused.reason, b_id));
  }

  auto fresh = run(a, "fresh-buffers", json::object());
  if (!fresh) return out;
  auto in_fresh = CaseFiles::judge(a, *fresh, side.protocol, side.findings);
  out.record["reused_values_in_fresh_buffers"] = {{"case", a["id"]}, {"passed", in_fresh.passed}};
  if (!in_fresh.passed) {
    side.findings.add("output_cached", Severity::Reject,
                      fmt::format("{}'s values in new input tensors give a wrong output: {}", a_id,
                                  in_fresh.reason));
  }
  out.trace_case = b;
  return out;
}

}  // namespace kbv::eval
