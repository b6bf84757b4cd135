// What the candidate's worker reports it saw around each call, judged: global numerics flags
// changed (E3), harness entry points replaced (T4), persisting L2 left set (T7), library plans
// chosen under memory pressure (said only), and, for a
// forward, threads left running and outputs that changed after it returned (T2). Pure: the
// worker's answer in, flags out. One judge per evaluation: a precision flag lowered again after
// being put back is only seen across calls.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "judge/findings.hpp"

namespace kbv::judge {

class CallJudge {
 public:
  // Numerics, harness and L2 parts of any candidate answer; each is a no-op when absent.
  void call_state(const nlohmann::json& answer, const std::string& during, Findings& out);
  // call_state() plus the watch of a forward on `case_id` (threads, late output changes).
  void forward(const nlohmann::json& answer, const std::string& case_id, Findings& out);

  void numerics(const nlohmann::json& answer, Findings& out);
  static void harness(const nlohmann::json& answer, const std::string& during, Findings& out);
  static void l2(const nlohmann::json& answer, const std::string& during, Findings& out);
  static void watch(const nlohmann::json& answer, const std::string& case_id, Findings& out);
  static void plans(const nlohmann::json& answer, Findings& out);

 private:
  int precision_lowerings_ = 0;
};

// The static scan's findings (the reference worker parsed the candidate's source, never ran
// it): evidence only, warnings and infos.
void judge_static_scan(const nlohmann::json& scan, Findings& out);

}  // namespace kbv::judge
