#include "orchestrate/worker_protocol.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace kbv::orchestrate {
namespace {

// name, reference, candidate, purpose
constexpr std::array kCommands = {
    WorkerCommand{cmd::kPing, true, false, "is the kept reference worker alive and answering"},
    WorkerCommand{cmd::kExit, true, true, "end the worker (handled by the serve loop itself)"},
    WorkerCommand{cmd::kLoadProblem, true, false,
                  "import the problem, build the model, report its inputs, sizes and memory"},
    WorkerCommand{cmd::kDeviceFacts, true, false,
                  "the device's environment and memory, after a load kept off the device"},
    WorkerCommand{cmd::kSetPlan, true, false, "the memory plan's budget for cases kept resident"},
    WorkerCommand{cmd::kCapMemory, true, false,
                  "cap the reference's own device allocations (a session drawn ahead)"},
    WorkerCommand{cmd::kPlaceModel, true, false,
                  "a model loaded on the host (a session ahead) onto the device, once reserved"},
    WorkerCommand{cmd::kPrepareCase, true, false,
                  "make one hidden case resident (drawn or kept): inputs, state, golden outputs"},
    WorkerCommand{cmd::kUnpin, true, false, "cases no longer in use may be let go"},
    WorkerCommand{cmd::kShareCase, true, false,
                  "a case's input and state blocks (or a fresh copy) as descriptors"},
    WorkerCommand{cmd::kWriteInto, true, false,
                  "a case's input values into a block shared before (same addresses)"},
    WorkerCommand{cmd::kShareSlot, true, false, "the block the candidate copies its outputs into"},
    WorkerCommand{cmd::kJudge, true, false,
                  "measure the slot against a case's golden outputs; check its inputs"},
    WorkerCommand{cmd::kRelease, true, false, "blocks made for one candidate, no longer needed"},
    WorkerCommand{cmd::kEndCandidate, true, false,
                  "everything made for one candidate goes; cases stay for the next"},
    WorkerCommand{cmd::kPrepareTimingSets, true, false,
                  "the timing inputs and their golden outputs under the initial state"},
    WorkerCommand{cmd::kCheckTimingInputs, true, false,
                  "which timing inputs changed since they were drawn"},
    WorkerCommand{cmd::kScan, true, false, "static scan of the candidate's source (never run)"},
    WorkerCommand{cmd::kRoofline, true, false,
                  "the reference's compulsory bytes and FLOPs (and measured peaks)"},
    WorkerCommand{cmd::kImport, false, true,
                  "import the candidate file only: builds its extensions (build ahead)"},
    WorkerCommand{cmd::kLoadCandidate, false, true,
                  "import and construct ModelNew, report its state and numerics"},
    WorkerCommand{cmd::kSetMapping, false, true, "which reference state feeds which parameter"},
    WorkerCommand{cmd::kAttachSlot, false, true, "open the block outputs are copied into"},
    WorkerCommand{cmd::kRunCase, false, true,
                  "one forward on a case's shared inputs; outputs copied into the slot"},
    WorkerCommand{cmd::kPrepareTiming, false, true, "open the timing inputs, load the state"},
    WorkerCommand{cmd::kEndTiming, false, true, "unmap the timing inputs"},
    WorkerCommand{cmd::kEmitTimedOutput, false, true,
                  "a timing set's last output copied into the slot, to be judged"},
    WorkerCommand{cmd::kTrace, true, true,
                  "operator trace (and the GPU kernel trace) of a forward"},
    WorkerCommand{cmd::kTime, true, true, "one interleaved batch of timed forwards"},
    WorkerCommand{cmd::kTimeSecondary, true, true, "host-inclusive and hot-cache times"},
    WorkerCommand{cmd::kKernelAudit, true, true, "kernel spans against the event time (CUDA)"},
    WorkerCommand{cmd::kMemory, true, true, "peak and persistent memory of a forward"},
};

}  // namespace

std::string_view to_string(WorkerRole role) {
  return role == WorkerRole::Reference ? "reference" : "candidate";
}

std::span<const WorkerCommand> worker_commands() { return kCommands; }

const WorkerCommand* find_worker_command(std::string_view name) {
  for (const auto& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

nlohmann::json worker_request(std::string_view name, nlohmann::json fields) {
  if (!find_worker_command(name)) {
    throw std::logic_error(fmt::format("worker command {} is not declared", name));
  }
  if (fields.is_null()) fields = nlohmann::json::object();
  if (!fields.is_object()) throw std::logic_error("a worker request's fields must be an object");
  fields["cmd"] = std::string(name);
  return fields;
}

void require_served(WorkerRole role, const nlohmann::json& request) {
  const std::string name =
      request.is_object() && request.contains("cmd") && request["cmd"].is_string()
          ? request["cmd"].get<std::string>()
          : std::string();
  const WorkerCommand* command = find_worker_command(name);
  if (!command || !command->served_by(role)) {
    throw std::logic_error(
        fmt::format("the {} worker serves no command '{}' "
                    "(orchestrate/worker_protocol.cpp)",
                    to_string(role), name));
  }
}

nlohmann::json worker_protocol_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : kCommands) {
    nlohmann::json roles = nlohmann::json::array();
    if (c.reference) roles.push_back("reference");
    if (c.candidate) roles.push_back("candidate");
    out.push_back({{"name", c.name}, {"roles", roles}, {"purpose", c.purpose}});
  }
  return out;
}

}  // namespace kbv::orchestrate
