#include "judge/harness_fault.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <new>
#include <string_view>
#include <system_error>

namespace kbv::judge {
using orchestrate::Response;

HarnessFaultError::HarnessFaultError(HarnessFault fault, std::string error_detail)
    : std::runtime_error(fault.reason()),
      fault_(std::move(fault)),
      error_detail_(std::move(error_detail)) {}

std::optional<HarnessFault> classify_reference_failure(const Response& answer,
                                                       const std::string& stage) {
  switch (answer.status) {
    case Response::Status::Ok:
      return std::nullopt;
    case Response::Status::Died:
      if (answer.malformed) {
        return HarnessFault{FaultKind::Channel, stage,
                            "the reference worker " + answer.message + ": " +
                                first_line(answer.detail).substr(0, 200)};
      }
      // "the worker closed its channel and was killed by signal 9 (SIGKILL, Killed)"
      return HarnessFault{FaultKind::ReferenceCrashed, stage,
                          answer.message.starts_with("the worker ")
                              ? "the reference worker " + answer.message.substr(11)
                              : answer.message};
    case Response::Status::Timeout:
      // The reference's timeout is long (reference_timeout: at least 10 minutes): a reference
      // that hangs that long is a machine in trouble, and a rerun retries it.
      return HarnessFault{FaultKind::ReferenceCrashed, stage,
                          "the reference worker " + answer.message + "; it was killed"};
    case Response::Status::Error:
      break;
  }
  // The reference's own words are trusted: its process runs only kbv's and the problem's code.
  if (answer.resource == "out_of_memory") {
    // The reference's allocations are kbv's budget (its forward on kbv's inputs, its copies):
    // not the candidate's, and a problem that fits on a machine with more room is not broken.
    HarnessFault fault{FaultKind::OutOfMemory, stage, first_line(answer.message)};
    fault.memory = answer.memory;
    // On a line of its own: the reason quotes the first line only, the result keeps all.
    if (!answer.holding.empty()) fault.detail.append("\n").append(answer.holding);
    return fault;
  }
  if (answer.resource == "disk_full") {
    return HarnessFault{FaultKind::DiskFull, stage, first_line(answer.message)};
  }
  if (answer.error_kind == "internal_error") {
    return HarnessFault{FaultKind::Internal, stage,
                        "the reference worker's own code failed: " + first_line(answer.message)};
  }
  return std::nullopt;  // problem_error, usage_error, or the problem's code raising
}

std::optional<FaultKind> fault_of_errno(int code) {
  switch (code) {
    case ENOSPC:
    case EDQUOT:
      return FaultKind::DiskFull;
    case ENOMEM:
      return FaultKind::OutOfMemory;
    default:
      return std::nullopt;
  }
}

HarnessFault classify_exception(const std::exception& error, const std::string& stage) {
  if (const auto* fault = dynamic_cast<const HarnessFaultError*>(&error)) return fault->fault();
  if (dynamic_cast<const std::bad_alloc*>(&error)) {
    return {FaultKind::OutOfMemory, stage,
            std::string("kbv could not allocate memory: ") + error.what()};
  }
  if (const auto* system = dynamic_cast<const std::system_error*>(&error)) {
    const auto& category = system->code().category();
    if (category == std::generic_category() || category == std::system_category()) {
      if (auto kind = fault_of_errno(system->code().value())) return {*kind, stage, error.what()};
    }
  }
  return {FaultKind::Internal, stage, error.what()};
}

bool is_malformed_answer(const std::exception& error) {
  // The errors of reading data: json's, and the standard ones of numbers and indices in it.
  return dynamic_cast<const nlohmann::json::exception*>(&error) != nullptr ||
         dynamic_cast<const std::out_of_range*>(&error) != nullptr ||
         dynamic_cast<const std::invalid_argument*>(&error) != nullptr ||
         dynamic_cast<const std::length_error*>(&error) != nullptr;
}

std::string malformed_answer_reason(const std::exception& error) {
  return fmt::format(
      "an answer of the candidate's worker lacks what kbv reads from it ({}); the candidate's "
      "process can write anything on its own channel, so this is its doing",
      first_line(error.what()));
}

bool candidate_could_reach_reference(const HarnessFault& fault, bool candidate_ran,
                                     const nlohmann::json& candidate_isolation) {
  if (fault.kind != FaultKind::ReferenceCrashed && fault.kind != FaultKind::Channel) return false;
  if (!candidate_ran) return false;
  // Only a fresh /proc of its own (the sandbox's PID namespace) puts the reference out of reach.
  return !(candidate_isolation.is_object() && candidate_isolation.contains("pid_namespace") &&
           candidate_isolation["pid_namespace"] == true);
}

std::string reached_reference_reason(const HarnessFault& fault) {
  return fmt::format(
      "the reference worker failed ({}: {}) while the candidate ran without a PID namespace of "
      "its own, able to reach the reference's process; that may be its doing",
      to_string(fault.kind), first_line(fault.detail));
}

bool lacks_room(const DiskFacts& disk) {
  return disk.total_bytes > 0 && disk.free_bytes < std::max(disk.need_bytes, kMinimumRoom);
}

bool filled_by_candidate(const DiskFacts& disk) {
  return lacks_room(disk) && (disk.candidate_bytes > disk.golden_bytes + kOutputsSlack ||
                              disk.candidate_cache_bytes > kBuildCacheAllowance);
}

bool names_disk_full(const Response& answer) {
  if (answer.resource == "disk_full") return true;
  static constexpr std::array<std::string_view, 6> kMarks = {"No space left on device",
                                                             "Disk quota exceeded",
                                                             "os error 28",
                                                             "os error 122",
                                                             "ENOSPC",
                                                             "EDQUOT"};
  for (const auto* text : {&answer.message, &answer.detail}) {
    for (auto mark : kMarks) {
      if (text->find(mark) != std::string::npos) return true;
    }
  }
  return false;
}

namespace {

std::string describe(const DiskFacts& disk) {
  return fmt::format(
      "the file system of {} has {} bytes free of {} (kbv may need {} there); the candidate's "
      "own files on it hold {} bytes (build cache {})",
      disk.path, disk.free_bytes, disk.total_bytes, std::max(disk.need_bytes, kMinimumRoom),
      disk.candidate_bytes, disk.candidate_cache_bytes);
}

}  // namespace

std::optional<HarnessFault> classify_candidate_failure(const FailedStage& stage,
                                                       const std::vector<DiskFacts>& disks) {
  // A crash (Died) or hang (Timeout) is the candidate's whatever the disk: its worker's own code
  // does nothing that fails that way on a full disk, and the candidate can do both at will. The
  // scratch quota is the candidate's own limit.
  if (stage.status != Response::Status::Error) return std::nullopt;
  if (stage.error_kind == "scratch_quota_exceeded") return std::nullopt;
  if (stage.failure.verdict != Verdict::RuntimeError &&
      stage.failure.verdict != Verdict::CompileError) {
    return std::nullopt;
  }
  if (!stage.names_disk_full) return std::nullopt;
  if (disk_filled_by_candidate(disks)) return std::nullopt;
  for (const auto& disk : disks) {
    if (!lacks_room(disk)) continue;
    return HarnessFault{FaultKind::DiskFull, stage.stage,
                        describe(disk) + "; the worker said: " + first_line(stage.failure.reason)};
  }
  // The text says ENOSPC but no disk kbv writes to lacks room: the candidate's own writes (its
  // scratch tmpfs, which is its quota) or its own words.
  return std::nullopt;
}

std::optional<DiskFacts> disk_filled_by_candidate(const std::vector<DiskFacts>& disks) {
  for (const auto& disk : disks) {
    if (filled_by_candidate(disk)) return disk;
  }
  return std::nullopt;
}

std::string filled_disk_reason(const DiskFacts& disk) {
  return fmt::format(
      "the candidate filled the disk kbv writes to: {}, more than its outputs need (its "
      "golden-sized outputs, {} bytes of golden outputs in all)",
      describe(disk), disk.golden_bytes);
}

}  // namespace kbv::judge
