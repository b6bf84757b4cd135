#include "eval/case_path.hpp"

#include <fmt/format.h>

#include "eval/reference_work.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;
using orchestrate::Response;
using orchestrate::worker_request;
namespace cmd = orchestrate::cmd;

CasePath::CasePath(WorkerExchange& workers, ReferenceSession& session, const Protocol& protocol,
                   const fs::path& problem)
    : workers_(workers), session_(session), protocol_(protocol), problem_(problem) {}

void CasePath::require(const Response& response, const std::string& stage) const {
  require_reference_answer(response, problem_, stage);
}

json& CasePath::session_case(const std::string& id) {
  for (auto& c : session_.prepared["cases"]) {
    if (c["id"] == id) return c;
  }
  for (auto& c : session_.prepared["rechecks"]) {
    if (c["id"] == id) return c;
  }
  throw std::logic_error("case " + id + " is not one of the session's");
}

json& CasePath::perturbed(const json& c) {
  const std::string id = c["id"].get<std::string>() + "~perturbed";
  auto& extra = session_.prepared["rechecks"];
  if (!extra.is_array()) extra = json::array();
  for (auto& e : extra) {
    if (e["id"] == id) return e;
  }
  extra.push_back({{"id", id},
                   {"family", c["family"]},
                   {"draw", c["draw"]},
                   {"redraw", c["redraw"]},
                   {"perturb", true},
                   {"drawn", false}});
  return extra.back();
}

void CasePath::ensure(json& c, bool pin) {
  json& own = session_case(c["id"].get<std::string>());
  ensure_case(session_, own, problem_, workers_.reference_call(), pin);
  c = own;
}

void CasePath::unpin(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  require(workers_.reference(worker_request(cmd::kUnpin, {{"ids", ids}})), "letting cases go");
}

Response CasePath::attach_slot(const json& c) {
  json outputs = json::array();
  for (const auto& b : c.at("baselines").at("tf32")) {
    outputs.push_back({{"dtype", b.at("dtype")}, {"shape", b.at("shape")}});
  }
  auto slot = workers_.reference(worker_request(cmd::kShareSlot, {{"outputs", outputs}}));
  require(slot, "making the output slot");
  return workers_.candidate(worker_request(cmd::kAttachSlot, {{"slot", slot.result["slot"]}}),
                            slot.fds);
}

CaseRun CasePath::run(const json& c, const RunInputs& how) {
  const bool reuse = !how.reuse.empty();
  auto shared = workers_.reference(
      worker_request(cmd::kShareCase, {{"id", c["id"]}, {"fresh", how.fresh}, {"inputs", !reuse}}));
  require(shared, "sharing a case with the candidate");
  json request = {{"state", shared.result["state"]}};
  CaseRun out;
  if (reuse) {
    request["reuse"] = how.reuse;
    out.token = how.reuse;
  } else {
    request["inputs"] = shared.result["inputs"];
    out.token = shared.result["inputs"]["token"].get<std::string>();
  }
  if (how.keep) request["keep"] = true;
  if (!how.poison) request["poison"] = false;
  out.answer = workers_.candidate(worker_request(cmd::kRunCase, request), shared.fds);
  return out;
}

Response CasePath::trace(const json& c, const char* part) {
  // Resident again if it was let go since the re-checks (a budget of 0 keeps only the case
  // prepared last, which need not be this one): drawn again from the same secret.
  ensure_case(session_, session_case(c["id"].get<std::string>()), problem_,
              workers_.reference_call(), /*pin=*/false);
  auto shared = workers_.reference(
      worker_request(cmd::kShareCase, {{"id", c["id"]}, {"fresh", false}, {"inputs", true}}));
  require(shared, "sharing a case with the candidate");
  return workers_.candidate(worker_request(cmd::kTrace, {{"inputs", shared.result["inputs"]},
                                                         {"state", shared.result["state"]},
                                                         {"parts", json::array({part})}}),
                            shared.fds);
}

CaseJudgement CasePath::judge(const json& c, const json& run, const std::string& token,
                              std::optional<int> timing) {
  auto plans = judge::plan_outputs(c, run, protocol_.reference_variant, protocol_.policy);
  json request = {{"passes", judge::passes_of(plans)}};
  if (!token.empty()) request["token"] = token;  // else the case's own inputs
  if (timing) {
    request["timing"] = *timing;
  } else {
    request["id"] = c["id"];
  }
  auto answer = workers_.reference(worker_request(cmd::kJudge, request));
  require(answer, "judging a candidate's outputs");
  CaseJudgement out;
  out.outputs =
      judge::judge_outputs(plans, answer.result.value("outputs", json::array()), protocol_.policy);
  out.inputs_mutated = answer.result.value("inputs_mutated", json::array());
  out.slot_checksums = answer.result.value("slot_checksums", json::array());
  return out;
}

void CasePath::write_into(const json& c, const std::string& token) {
  require(workers_.reference(worker_request(cmd::kWriteInto, {{"id", c["id"]}, {"token", token}})),
          "writing new values into shared inputs");
}

void CasePath::release(const std::vector<std::string>& tokens) {
  if (tokens.empty()) return;
  require(workers_.reference(worker_request(cmd::kRelease, {{"tokens", tokens}})),
          "releasing shared inputs");
}

std::optional<Response> CasePath::prepare_timing(int count, json& golden) {
  std::vector<std::string> ids;
  auto& cases = session_.prepared["cases"];
  for (auto& c : cases) {
    if (static_cast<int>(ids.size()) >= count) break;
    for (const auto& family : protocol_.timing_families) {
      if (c["family"] == family) ids.push_back(c["id"].get<std::string>());
    }
  }
  if (ids.empty() && !cases.empty()) ids.push_back(cases[0]["id"].get<std::string>());
  for (const auto& id : ids) {
    ensure_case(session_, session_case(id), problem_, workers_.reference_call(), /*pin=*/true);
  }
  timing_pins_ = ids;
  auto sets = workers_.reference(worker_request(cmd::kPrepareTimingSets, {{"ids", ids}}));
  require(sets, "preparing the timing inputs");
  golden = sets.result["golden"];
  json layouts = json::array();
  for (const auto& s : sets.result["sets"]) layouts.push_back(s["inputs"]);
  auto loaded = workers_.candidate(
      worker_request(cmd::kPrepareTiming, {{"sets", layouts}, {"state", sets.result["state"]}}),
      sets.fds);
  if (!loaded.ok()) return loaded;
  return std::nullopt;
}

json CasePath::changed_timing_inputs() {
  auto answer = workers_.reference(worker_request(cmd::kCheckTimingInputs));
  require(answer, "checking the timing inputs");
  return answer.result.value("changed", json::array());
}

void CasePath::end_timing() {
  workers_.candidate(worker_request(cmd::kEndTiming));  // a failure here changes no verdict
  unpin(timing_pins_);
  timing_pins_.clear();
}

}  // namespace kbv::eval
