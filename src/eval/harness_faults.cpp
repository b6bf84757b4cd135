#include "eval/harness_faults.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "orchestrate/scratch_quota.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;

namespace {

std::optional<dev_t> device_of(const fs::path& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st.st_dev;
}

std::vector<judge::DiskFacts> observe(const DiskPlaces& places) {
  std::vector<judge::DiskFacts> out;
  std::vector<dev_t> seen;
  // No golden outputs on disk any more: the candidate's allowance there is its scratch alone.
  const unsigned long long golden = 0;
  for (const auto& place : {places.run_dir, places.candidate_folder, places.cache_folder}) {
    auto dev = device_of(place);
    if (!dev || std::find(seen.begin(), seen.end(), *dev) != seen.end()) continue;
    seen.push_back(*dev);
    struct statvfs st {};
    if (::statvfs(place.c_str(), &st) != 0) continue;
    judge::DiskFacts disk;
    disk.path = place.string();
    // Root may write into the blocks reserved for it, so its writes fail only when none is left.
    const auto blocks = ::geteuid() == 0 ? st.f_bfree : st.f_bavail;
    disk.free_bytes = static_cast<unsigned long long>(blocks) * st.f_frsize;
    disk.total_bytes = static_cast<unsigned long long>(st.f_blocks) * st.f_frsize;
    disk.need_bytes = places.need_bytes;
    disk.golden_bytes = golden;
    // The candidate's folders on this file system. directory_usage stays on the folder's own
    // file system, so the sandbox's scratch tmpfs (mounted only in the candidate's namespace,
    // and its quota, not the disk) is not counted; without the sandbox the scratch folder is on
    // the disk and counts.
    if (!places.candidate_folder.empty()) {
      for (const char* sub : {"scratch"}) {
        auto folder = places.candidate_folder / sub;
        if (device_of(folder) == dev) {
          disk.candidate_bytes += orchestrate::directory_usage(folder).bytes;
        }
      }
    }
    if (device_of(places.cache_folder) == dev) {
      disk.candidate_cache_bytes = orchestrate::directory_usage(places.cache_folder).bytes;
    }
    out.push_back(std::move(disk));
  }
  return out;
}

}  // namespace

std::vector<judge::DiskFacts> observe_disks(const DiskPlaces& places) {
  try {
    return observe(places);
  } catch (const std::exception&) {
    return {};  // no facts: nothing is blamed on the candidate, nothing called a full disk
  }
}

std::optional<HarnessFault> candidate_disk_fault(const judge::FailedStage& stage,
                                                 const DiskPlaces& places) {
  if (!stage.names_disk_full) return std::nullopt;  // the rules need it; spare the walk
  return judge::classify_candidate_failure(stage, observe_disks(places));
}

FaultOutcome fault_outcome(const std::exception& error, const std::string& stage,
                           const DiskPlaces& places, const CandidateState& candidate) {
  FaultOutcome out;
  if (candidate.answered && judge::is_malformed_answer(error)) {
    out.candidate_failure =
        judge::StageFailure{Verdict::RuntimeError, judge::malformed_answer_reason(error)};
    out.error_detail = error.what();
    return out;
  }
  HarnessFault fault = judge::classify_exception(error, stage);
  if (const auto* raised = dynamic_cast<const judge::HarnessFaultError*>(&error)) {
    out.error_detail = raised->error_detail();
  }
  if (fault.kind == FaultKind::DiskFull) {
    // kbv's own write (or the reference's) found the disk full; when the candidate's own files
    // are what fills it, that is the candidate's doing, or a disk filler would never be judged.
    if (auto filled = judge::disk_filled_by_candidate(observe_disks(places))) {
      out.candidate_failure =
          judge::StageFailure{Verdict::RuntimeError, judge::filled_disk_reason(*filled)};
      out.error_detail = fault.detail;
      return out;
    }
  }
  if (judge::candidate_could_reach_reference(fault, candidate.ran, candidate.isolation)) {
    out.candidate_failure =
        judge::StageFailure{Verdict::RuntimeError, judge::reached_reference_reason(fault)};
    if (out.error_detail.empty()) out.error_detail = fault.detail;
    return out;
  }
  out.fault = std::move(fault);
  return out;
}

std::string stage_in_words(const std::string& stage) {
  static const std::map<std::string, std::string> words = {
      {"start", "starting the evaluation (workers, folders, the problem)"},
      {"reference", "drawing the hidden cases"},
      {"candidate_load", "building and loading the candidate"},
      {"correctness", "checking the candidate's outputs"},
      {"rechecks", "re-checking the candidate"},
      {"trace", "tracing the candidate"},
      {"measurement", "measuring time and memory"}};
  auto it = words.find(stage);
  return it == words.end() ? stage : it->second;
}

Result harness_error_result(const EvalRequest& request, HarnessFault fault,
                            const std::string& problem_name) {
  namespace fs = std::filesystem;
  Result result;
  result.verdict = Verdict::HarnessError;
  result.reason = fault.reason();
  result.harness_fault = std::move(fault);
  result.candidate = {{"path", fs::absolute(request.candidate).string()}};
  result.problem = {{"path", fs::absolute(request.problem).string()}, {"name", problem_name}};
  result.protocol = {{"name", request.settings.protocol}};
  result.limits = request.limits.to_json();
  return result;
}

}  // namespace kbv::eval
