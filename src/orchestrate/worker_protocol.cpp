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
                  "import the problem, build the model, save init inputs, report its shape"},
    WorkerCommand{cmd::kPrepareFamily, true, false,
                  "draw hidden cases of one family: inputs, state, golden outputs, truth"},
    WorkerCommand{cmd::kPrepareTimingSets, true, false,
                  "the timing inputs and the golden outputs of the cases they came from"},
    WorkerCommand{cmd::kScan, true, false, "static scan of the candidate's source (never run)"},
    WorkerCommand{cmd::kRoofline, true, false,
                  "the reference's compulsory bytes and FLOPs (and measured peaks)"},
    WorkerCommand{cmd::kImport, false, true,
                  "import the candidate file only: builds its extensions (build ahead)"},
    WorkerCommand{cmd::kLoadCandidate, false, true,
                  "import and construct ModelNew, report its state and numerics"},
    WorkerCommand{cmd::kSetMapping, false, true, "which reference state feeds which parameter"},
    WorkerCommand{cmd::kRunCase, false, true, "one forward on a case's inputs; save the outputs"},
    WorkerCommand{cmd::kPrepareTiming, false, true, "load the timing inputs and state"},
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
