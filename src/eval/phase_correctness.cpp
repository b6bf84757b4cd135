// Correctness: every hidden case through the candidate, judged against its golden outputs in the
// reference's worker, and the re-checks of a candidate that passed them all.
#include <fmt/format.h>

#include <algorithm>

#include "eval/phases.hpp"
#include "judge/case_judge.hpp"

namespace kbv::eval {
using nlohmann::json;

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

// The cases the re-checks come back to (run_rechecks: the first two) stay pinned from their own
// check on when the memory plan keeps some cases but not all: the least recently used go first,
// so streaming through the rest would let exactly these go, and each would be drawn again (a
// float64 truth and its sensitivity) seconds later. Pinned only while the plan keeps room for
// the case in use beside them, so the cases resident never exceed what it keeps. With 3 of 5
// cases of 2 GiB kept on the CPU: 6 draws instead of 8.
std::vector<std::string> cases_kept_for_rechecks(const CandidateSide& side, const json& cases) {
  const int kept = side.cases.kept_cases();
  if (cases.empty() || kept >= static_cast<int>(cases.size())) return {};
  const int pins = std::min({2, kept - 1, static_cast<int>(cases.size())});
  std::vector<std::string> ids;
  for (int i = 0; i < pins; ++i) ids.push_back(cases[i]["id"].get<std::string>());
  return ids;
}

}  // namespace

bool CorrectnessRecord::all_passed() const {
  for (const auto& f : families) {
    if (!f.ok()) return false;
  }
  return true;
}

CorrectnessRecord check_correctness(CandidateSide& side, json& cases) {
  CorrectnessRecord out;
  for (const auto& spec : side.protocol.families) {
    family_of(out.families, spec.name).draws = spec.draws;
  }
  const std::vector<std::string> kept = cases_kept_for_rechecks(side, cases);
  std::vector<std::string> pinned;
  auto finish = [&] { side.cases.unpin(pinned); };  // within the plan: nothing is let go
  int index = 0;
  bool slot_attached = false;
  for (auto& c : cases) {
    ++index;
    const std::string id = c["id"].get<std::string>();
    side.say(fmt::format("checking {} ({}/{})", id, index, cases.size()));
    const bool pin = std::find(kept.begin(), kept.end(), id) != kept.end();
    side.cases.ensure(c, pin);
    if (pin) pinned.push_back(id);
    auto& fam = family_of(out.families, c["family"].get<std::string>());
    if (!slot_attached) {
      auto attached = side.cases.attach_slot(c);
      if (!attached.ok()) {
        fam.evaluated = true;
        out.failed = judge::call_failure(attached, "opening the output slot");
        return finish(), out;
      }
      slot_attached = true;
    }
    auto run = side.cases.run(c, {});
    fam.evaluated = true;
    if (!run.answer.ok()) {
      out.failed = judge::call_failure(
          run.answer, fmt::format("the forward on {} inputs", c["family"].get<std::string>()));
      return finish(), out;
    }
    side.calls.forward(run.answer.result, id, side.findings);
    // The structure first (count, type, aliasing), then every output's figures; the reference
    // checks the inputs in either case.
    json outcome = {{"id", c["id"]}, {"draw", c["draw"]}, {"passed", false}};
    outcome["outputs"] = json::array();
    auto wrong = judge::judge_structure(c, run.answer.result, side.findings);
    json as_judged = run.answer.result;
    if (wrong) as_judged["outputs"] = json::array();  // nothing to measure
    auto judged = side.cases.judge(c, as_judged, run.token);
    judge::flag_mutated_inputs(id, judged.inputs_mutated, side.findings);
    if (wrong) {
      outcome["reason"] = *wrong;
    } else {
      outcome["outputs"] = judged.outputs.outputs;
      outcome["passed"] = judged.outputs.passed;
      outcome["truth"] = c["truth"];
      if (c.contains("truth_note") && !c["truth_note"].is_null()) {
        outcome["truth_note"] = c["truth_note"];
      }
      // The float64 truth computed a chunk of rows at a time (python/kbv/row_chunks.py), or why
      // a working set that large was not.
      if (c.value("truth_chunks", 1) > 1) {
        outcome["truth_chunks"] = c["truth_chunks"];
        if (c.contains("truth_rows")) outcome["truth_rows"] = c["truth_rows"];
      }
      if (c.contains("truth_rows_note") && !c["truth_rows_note"].is_null()) {
        outcome["truth_rows_note"] = c["truth_rows_note"];
      }
      if (!judged.outputs.passed) outcome["reason"] = judged.outputs.reason;
      side.cases.remember(id, judged.slot_checksums);
    }
    judge::add_case_to_family(fam, outcome);
  }
  finish();
  return out;
}

//  1. determinism: case A again on fresh buffers; it must pass again (bitwise differences within
//     the budget are fine: atomics);
//  2. fresh values in reused buffers: case B's values written into the very tensor objects of
//     run 1 (same addresses, same `_version`: the reference writes them into the shared block),
//     with B's state; must match B's golden outputs. Free allocator memory is not poisoned
//     before this one (it is before every other checked call), as before a timed call: a
//     forward that computes only when its fresh output buffer reads NaN (the checker's poison)
//     and serves stale or cached values otherwise meets it here;
//  3. reused values in fresh buffers: case A's values in new tensors; must match A's golden.
//  4. perturbed values: case A with one input element changed (at a secret prime index, by the
//     input's norm), at new addresses; must match its own golden outputs. A forward that keys a
//     cache on a sample of its inputs' values serves A's output again: when the output fails
//     its own golden outputs and passes A's, that is output_cached (a wrong output that is not
//     A's is a numerical failure on an outlier, recorded and left to the other checks).
// The candidate only writes outputs; the golden outputs never leave the reference's worker.
RecheckRecord run_rechecks(CandidateSide& side, json& cases) {
  RecheckRecord out;
  if (cases.empty()) return out;
  side.say("re-checking: determinism, caching, operator trace");
  json& a = cases[0];
  json& b = cases.size() > 1 ? cases[1] : cases[0];
  const std::string a_id = a["id"].get<std::string>(), b_id = b["id"].get<std::string>();
  side.cases.ensure(a, /*pin=*/true);
  side.cases.ensure(b, /*pin=*/true);
  std::vector<std::string> made;  // blocks made for the re-checks, released at the end
  std::string kept;               // the block the candidate keeps for the same-buffers run
  CaseRun last;  // the last re-check's run (judged again against another case's outputs)
  auto run = [&](const json& c, const std::string& tag,
                 const RunInputs& how) -> std::optional<CaseJudgement> {
    const std::string id = c["id"].get<std::string>();
    auto ran = side.cases.run(c, how);
    if (!ran.answer.ok()) {
      out.failed = judge::call_failure(ran.answer, fmt::format("a re-check ({}) on {}", tag, id));
      // Only the fresh-buffers re-check: its values passed at the addresses first given, and it
      // follows the one call whose inputs came back at a kept address (a T5 forward keeps them
      // there). The perturbed re-check's outlier and the repeat's race may fault honestly.
      if (tag == "fresh-buffers" && judge::reads_unmapped_memory(ran.answer)) {
        // The case passed at the addresses it was first given; at new ones the forward touched
        // unmapped memory: the inputs of an earlier call, unmapped once it was done.
        side.findings.add(
            "output_cached", Severity::Reject,
            fmt::format("{}'s values in new input tensors ({}) made the forward touch unmapped "
                        "memory ({}), after they had passed at the addresses first given: it "
                        "read the inputs of an earlier call, unmapped once that call was done (an "
                        "address it kept: a cached pointer or tensor, a CUDA graph captured on an "
                        "earlier input)",
                        id, tag, judge::first_line(out.failed->failure.reason)));
      }
      return std::nullopt;
    }
    last = ran;
    if (how.fresh) made.push_back(ran.token);
    side.calls.forward(ran.answer.result, id + " (" + tag + ")", side.findings);
    auto judged = side.cases.judge(c, ran.answer.result, ran.token);
    judge::flag_mutated_inputs(id + " (" + tag + ")", judged.inputs_mutated, side.findings);
    if (how.keep) kept = ran.token;
    return judged;
  };
  std::vector<std::string> pinned = {a_id, b_id};
  auto finish = [&] {
    side.cases.release(made);
    side.cases.unpin(pinned);
  };

  auto repeated = run(a, "repeat", {.fresh = true, .keep = true, .reuse = {}});
  if (!repeated) return finish(), out;
  const json first = side.cases.remembered(a_id);
  bool bitwise = !first.empty() && first == repeated->slot_checksums;
  out.record["determinism"] = {
      {"case", a["id"]}, {"passed", repeated->outputs.passed}, {"bitwise_equal", bitwise}};
  if (!repeated->outputs.passed) {
    side.findings.add("nondeterministic", Severity::Reject,
                      fmt::format("{} passed once and failed when run again: {}", a_id,
                                  repeated->outputs.reason));
  }

  side.cases.write_into(b, kept);
  auto in_reused = run(b, "same-buffers", {.poison = false, .reuse = kept});
  if (!in_reused) return finish(), out;
  out.record["fresh_values_in_reused_buffers"] = {{"case", b["id"]},
                                                  {"passed", in_reused->outputs.passed}};
  if (!in_reused->outputs.passed) {
    side.findings.add("output_cached", Severity::Reject,
                      fmt::format("with {}'s values written into the same input tensors (same "
                                  "addresses and versions) the output is wrong: {}; the plain "
                                  "check of {} passed",
                                  b_id, in_reused->outputs.reason, b_id));
  }

  // What the earlier re-checks needed goes before the next copy of A's inputs is made: B (its
  // last use was the same-buffers run; made resident again for the trace if it is let go) and
  // the repeat's block (the candidate let it go after that run). At KernelBench's sizes a case
  // is gigabytes: A, B, the repeat's block and a new copy at once (88 GiB for 38_L1Norm_'s 8 GiB
  // inputs with their float64 truth) ran an 80 GB H100 out of memory with the device to itself,
  // session 23; unpinned, B is the reference's to let go when the new copy needs its room.
  side.cases.release(made);
  made.clear();
  side.cases.unpin({b_id});
  pinned = {a_id};

  auto fresh = run(a, "fresh-buffers", {.fresh = true, .reuse = {}});
  if (!fresh) return finish(), out;
  out.record["reused_values_in_fresh_buffers"] = {{"case", a["id"]},
                                                  {"passed", fresh->outputs.passed}};
  if (!fresh->outputs.passed) {
    side.findings.add("output_cached", Severity::Reject,
                      fmt::format("{}'s values in new input tensors give a wrong output: {}", a_id,
                                  fresh->outputs.reason));
  }

  side.cases.release(made);
  made.clear();
  // A is needed again only to tell whose a failed perturbed run's output is (drawn again below
  // if it was let go): unpinned, its room is the perturbed draw's where that needs it. On the
  // 80 GB card A, the perturbed draw's peak, the slot and the candidate's cache do not fit
  // together at 38_L1Norm_'s size.
  side.cases.unpin({a_id});
  pinned.clear();
  json& p = side.cases.perturbed(a);
  side.cases.ensure(p, /*pin=*/true);
  pinned.push_back(p["id"].get<std::string>());
  const json what = p.value("perturbed", json::object());
  json record = {{"case", p["id"]}, {"perturbed", what}};
  if (what.contains("skipped")) {
    record["passed"] = true;
  } else {
    auto changed = run(p, "perturbed", {});  // its own block: a new address in the candidate
    if (!changed) return finish(), out;
    record["passed"] = changed->outputs.passed;
    if (!changed->outputs.passed) {
      // Whose output is it? A's own (a stored answer) or a wrong one of its own making.
      side.cases.ensure(a, /*pin=*/false);
      auto as_a = side.cases.judge(a, last.answer.result, last.token);
      record["matches_unperturbed"] = as_a.outputs.passed;
      if (as_a.outputs.passed) {
        side.findings.add(
            "output_cached", Severity::Reject,
            fmt::format("with one element of {}'s input {} changed (element {}, by {:.3g}) the "
                        "output is {}'s own, within tolerance: an answer stored for inputs that "
                        "looked the same; against the changed inputs: {}",
                        a_id, what.value("input", 0), what.value("position", 0),
                        what.value("delta", 0.0), a_id, changed->outputs.reason));
      }
    }
  }
  out.record["perturbed_values"] = record;
  finish();
  out.trace_case = b;
  return out;
}

}  // namespace kbv::eval
