// The worker protocol, declared once: every command the orchestrator may send to a worker
// (`python -m kbv.worker --role ROLE`), which roles serve it, and what it is for. Requests are
// JSON objects {"cmd": NAME, ...fields}; answers are {"ok": true, "result": ...} or
// {"ok": false, "error": {kind, message, detail}} (docs/worker-protocol.md).
//
// WorkerProcess::send refuses a command its role does not serve, so a typo or a command sent to
// the wrong worker is kbv's own bug, caught at the first send rather than answered "unknown
// command" at run time. tests/python/test_worker_protocol.py holds this table (printed by
// `kbv worker-protocol`) against the Python handlers (`cmd_<name>` of ReferenceRole and
// CandidateRole), both ways.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

namespace kbv::orchestrate {

enum class WorkerRole { Reference, Candidate };
std::string_view to_string(WorkerRole role);

struct WorkerCommand {
  std::string_view name;
  bool reference;  // served by the reference role
  bool candidate;  // served by the candidate role
  std::string_view purpose;

  bool served_by(WorkerRole role) const {
    return role == WorkerRole::Reference ? reference : candidate;
  }
};

std::span<const WorkerCommand> worker_commands();
const WorkerCommand* find_worker_command(std::string_view name);

// The command names, for the request builders (a name not declared here cannot be sent).
namespace cmd {
inline constexpr std::string_view kPing = "ping";
inline constexpr std::string_view kExit = "exit";
inline constexpr std::string_view kLoadProblem = "load_problem";
inline constexpr std::string_view kDeviceFacts = "device_facts";
inline constexpr std::string_view kSetPlan = "set_plan";
inline constexpr std::string_view kCapMemory = "cap_memory";
inline constexpr std::string_view kPlaceModel = "place_model";
inline constexpr std::string_view kPrepareCase = "prepare_case";
inline constexpr std::string_view kUnpin = "unpin";
inline constexpr std::string_view kShareCase = "share_case";
inline constexpr std::string_view kWriteInto = "write_into";
inline constexpr std::string_view kShareSlot = "share_slot";
inline constexpr std::string_view kJudge = "judge";
inline constexpr std::string_view kRelease = "release";
inline constexpr std::string_view kEndCandidate = "end_candidate";
inline constexpr std::string_view kPrepareTimingSets = "prepare_timing_sets";
inline constexpr std::string_view kCheckTimingInputs = "check_timing_inputs";
inline constexpr std::string_view kScan = "scan";
inline constexpr std::string_view kRoofline = "roofline";
inline constexpr std::string_view kImport = "import";
inline constexpr std::string_view kLoadCandidate = "load_candidate";
inline constexpr std::string_view kSetMapping = "set_mapping";
inline constexpr std::string_view kRunCase = "run_case";
inline constexpr std::string_view kAttachSlot = "attach_slot";
inline constexpr std::string_view kPrepareTiming = "prepare_timing";
inline constexpr std::string_view kEndTiming = "end_timing";
inline constexpr std::string_view kEmitTimedOutput = "emit_timed_output";
inline constexpr std::string_view kTrace = "trace";
inline constexpr std::string_view kTime = "time";
inline constexpr std::string_view kTimeSecondary = "time_secondary";
inline constexpr std::string_view kKernelAudit = "kernel_audit";
inline constexpr std::string_view kMemory = "memory";
}  // namespace cmd

// {"cmd": name, ...fields}; `fields` must be an object (or null).
nlohmann::json worker_request(std::string_view name, nlohmann::json fields = nullptr);

// Throws std::logic_error unless `request` is an object whose "cmd" is declared for `role`.
void require_served(WorkerRole role, const nlohmann::json& request);

// The table as JSON: [{name, roles: [...], purpose}], for `kbv worker-protocol` and the docs.
nlohmann::json worker_protocol_json();

}  // namespace kbv::orchestrate
