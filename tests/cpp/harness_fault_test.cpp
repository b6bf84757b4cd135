// The harness-fault rules (judge/harness_fault.hpp): what makes a failure kbv's own
// (harness_error) rather than the problem's or the candidate's, and that text the candidate
// controls never does.
#include "judge/harness_fault.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <system_error>

#include "judge/stage_failure.hpp"

namespace kbv::judge {
namespace {
using orchestrate::Response;
namespace fs = std::filesystem;

Response died(std::string message, bool malformed = false) {
  Response r;
  r.status = Response::Status::Died;
  r.message = std::move(message);
  r.malformed = malformed;
  return r;
}

Response error(std::string kind, std::string message, std::string resource = "") {
  Response r;
  r.status = Response::Status::Error;
  r.error_kind = std::move(kind);
  r.message = std::move(message);
  r.resource = std::move(resource);
  return r;
}

TEST(HarnessFault, ReferenceThatDiedHungOrSentJunkIsAHarnessFault) {
  auto crashed = classify_reference_failure(
      died("the worker closed its channel and was killed by signal 9"), "drawing");
  ASSERT_TRUE(crashed);
  EXPECT_EQ(crashed->kind, FaultKind::ReferenceCrashed);
  EXPECT_EQ(crashed->stage, "drawing");
  EXPECT_EQ(crashed->detail, "the reference worker closed its channel and was killed by signal 9");

  Response hung;
  hung.status = Response::Status::Timeout;
  hung.message = "did not answer within 600 s";
  ASSERT_TRUE(classify_reference_failure(hung, "timing"));
  EXPECT_EQ(classify_reference_failure(hung, "timing")->kind, FaultKind::ReferenceCrashed);

  auto junk = classify_reference_failure(
      died("sent a malformed message on its channel", /*malformed=*/true), "loading");
  ASSERT_TRUE(junk);
  EXPECT_EQ(junk->kind, FaultKind::Channel);
}

TEST(HarnessFault, ReferenceInternalErrorAndExhaustedResourcesAreHarnessFaults) {
  EXPECT_EQ(classify_reference_failure(error("internal_error", "KeyError: 'x'"), "s")->kind,
            FaultKind::Internal);
  EXPECT_EQ(classify_reference_failure(
                error("runtime_error", "forward raised RuntimeError: can't allocate memory",
                      "out_of_memory"),
                "s")
                ->kind,
            FaultKind::OutOfMemory);
  EXPECT_EQ(classify_reference_failure(
                error("internal_error", "SafetensorError: os error 28", "disk_full"), "s")
                ->kind,
            FaultKind::DiskFull);
}

TEST(HarnessFault, AReferenceOutOfMemorySaysWhatItHeldBelowTheReasonsLine) {
  auto answer = error("internal_error",
                      "RuntimeError: kbv_native: cuMemCreate failed: "
                      "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
                      "out_of_memory");
  answer.memory = "device";
  answer.holding = "the reference held 2 cases (2 pinned) 64.00 GiB";
  auto fault = classify_reference_failure(answer, "sharing a case with the candidate");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->detail,
            "RuntimeError: kbv_native: cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY: out of "
            "memory\nthe reference held 2 cases (2 pinned) 64.00 GiB");
  // The result's reason quotes the first line only.
  EXPECT_EQ(first_line(fault->detail).find("pinned"), std::string::npos);
}

TEST(HarnessFault, ABrokenProblemStaysTheProblems) {
  for (const char* kind : {"problem_error", "usage_error", "runtime_error", "output_error"}) {
    EXPECT_FALSE(classify_reference_failure(error(kind, "get_inputs raised"), "s")) << kind;
  }
}

TEST(HarnessFault, ExceptionsAreClassifiedByTypeAndErrno) {
  const fs::filesystem_error full("cannot copy", fs::path("/a"), fs::path("/b"),
                                  std::error_code(ENOSPC, std::generic_category()));
  EXPECT_EQ(classify_exception(full, "s").kind, FaultKind::DiskFull);
  const std::system_error quota(EDQUOT, std::generic_category(), "write");
  EXPECT_EQ(classify_exception(quota, "s").kind, FaultKind::DiskFull);
  const std::system_error nomem(ENOMEM, std::system_category(), "fork failed");
  EXPECT_EQ(classify_exception(nomem, "s").kind, FaultKind::OutOfMemory);
  EXPECT_EQ(classify_exception(std::bad_alloc(), "s").kind, FaultKind::OutOfMemory);
  const std::system_error other(EACCES, std::generic_category(), "open");
  EXPECT_EQ(classify_exception(other, "s").kind, FaultKind::Internal);
  EXPECT_EQ(classify_exception(std::logic_error("unknown flag id"), "s").kind, FaultKind::Internal);
  const HarnessFaultError raised(HarnessFault{FaultKind::Channel, "loading", "junk"}, "tail");
  EXPECT_EQ(classify_exception(raised, "elsewhere").kind, FaultKind::Channel);
  EXPECT_EQ(classify_exception(raised, "elsewhere").stage, "loading");
  EXPECT_EQ(raised.error_detail(), "tail");
}

TEST(HarnessFault, MalformedAnswersAreJsonErrors) {
  try {
    (void)nlohmann::json::parse("{\"a\":1}").at("missing");
    FAIL();
  } catch (const std::exception& error) {
    EXPECT_TRUE(is_malformed_answer(error));
  }
  EXPECT_TRUE(is_malformed_answer(std::out_of_range("map::at")));
  EXPECT_FALSE(is_malformed_answer(std::runtime_error("x")));
  EXPECT_FALSE(is_malformed_answer(std::logic_error("unknown flag id")));
}

TEST(HarnessFault, AReferenceTheCandidateCouldReachIsInDoubtTheCandidates) {
  const HarnessFault crashed{FaultKind::ReferenceCrashed, "tracing", "killed by signal 9"};
  const nlohmann::json boxed = {{"pid_namespace", true}};
  const nlohmann::json open = {{"pid_namespace", false}};
  EXPECT_FALSE(candidate_could_reach_reference(crashed, /*candidate_ran=*/true, boxed));
  EXPECT_TRUE(candidate_could_reach_reference(crashed, true, open));
  EXPECT_TRUE(candidate_could_reach_reference(crashed, true, nlohmann::json::object()));
  EXPECT_FALSE(candidate_could_reach_reference(crashed, /*candidate_ran=*/false, open));
  const HarnessFault junk{FaultKind::Channel, "loading", "junk"};
  EXPECT_TRUE(candidate_could_reach_reference(junk, true, open));
  const HarnessFault full{FaultKind::DiskFull, "drawing", "ENOSPC"};
  EXPECT_FALSE(candidate_could_reach_reference(full, true, open));
  EXPECT_NE(reached_reference_reason(crashed).find("PID namespace"), std::string::npos);
}

DiskFacts disk(unsigned long long free, unsigned long long candidate = 0,
               unsigned long long cache = 0) {
  DiskFacts d;
  d.path = "/work/kbv-runs";
  d.total_bytes = 64ULL << 30;
  d.free_bytes = free;
  d.need_bytes = 64ULL << 20;
  d.candidate_bytes = candidate;
  d.candidate_cache_bytes = cache;
  d.golden_bytes = 8ULL << 20;
  return d;
}

TEST(HarnessFault, RoomIsAtLeastTheMinimumOrWhatKbvMayWrite) {
  EXPECT_TRUE(lacks_room(disk(0)));
  EXPECT_TRUE(lacks_room(disk(kMinimumRoom - 1)));
  EXPECT_FALSE(lacks_room(disk(kMinimumRoom)));
  auto big = disk(kMinimumRoom);
  big.need_bytes = 4ULL << 30;  // a case's outputs may need 4 GiB
  EXPECT_TRUE(lacks_room(big));
  DiskFacts unknown;  // statvfs failed: no facts, no fault
  EXPECT_FALSE(lacks_room(unknown));
}

TEST(HarnessFault, TheCandidateFilledADiskItsOwnFilesCrowd) {
  EXPECT_FALSE(filled_by_candidate(disk(0, 1 << 20)));                     // honest outputs
  EXPECT_TRUE(filled_by_candidate(disk(0, 2ULL << 30)));                   // a disk filler
  EXPECT_TRUE(filled_by_candidate(disk(0, 0, kBuildCacheAllowance + 1)));  // via its cache
  EXPECT_FALSE(filled_by_candidate(disk(10ULL << 30, 2ULL << 30)));        // room left: no fault
}

FailedStage candidate_stage(Verdict verdict, Response::Status status, std::string kind,
                            std::string message) {
  Response r;
  r.status = status;
  r.error_kind = std::move(kind);
  r.message = std::move(message);
  FailedStage s;
  s.failure = {verdict, first_line(r.message)};
  s.stage = "the forward on native inputs";
  s.status = r.status;
  s.error_kind = r.error_kind;
  s.names_disk_full = names_disk_full(r);
  return s;
}

TEST(HarnessFault, KbvsWriteOnAFullDiskIsAHarnessFault) {
  auto s = candidate_stage(Verdict::RuntimeError, Response::Status::Error, "internal_error",
                           "SafetensorError: No space left on device (os error 28)");
  auto fault = classify_candidate_failure(s, {disk(0, 1 << 20)});
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->kind, FaultKind::DiskFull);
  EXPECT_EQ(fault->stage, "the forward on native inputs");
  // A build that failed for want of room is no compile_error either.
  auto build = candidate_stage(Verdict::CompileError, Response::Status::Error, "compile_error",
                               "error building extension: No space left on device");
  EXPECT_TRUE(classify_candidate_failure(build, {disk(1 << 20)}));
}

TEST(HarnessFault, TheCandidatesWordsAloneNeverMakeAHarnessFault) {
  // "No space left on device" in its own exception, or a forged internal_error, on a disk with
  // room: its runtime_error.
  auto words = candidate_stage(Verdict::RuntimeError, Response::Status::Error, "runtime_error",
                               "forward raised OSError: [Errno 28] No space left on device");
  EXPECT_FALSE(classify_candidate_failure(words, {disk(10ULL << 30)}));
  auto forged = candidate_stage(Verdict::RuntimeError, Response::Status::Error, "internal_error",
                                "KeyError: 'outputs'");
  EXPECT_FALSE(classify_candidate_failure(forged, {disk(0)}));
  EXPECT_FALSE(classify_candidate_failure(words, {}));  // no facts: the candidate's
}

TEST(HarnessFault, ADiskTheCandidateFilledCrashesAndQuotasStayTheCandidates) {
  auto full = candidate_stage(Verdict::RuntimeError, Response::Status::Error, "internal_error",
                              "No space left on device");
  EXPECT_FALSE(classify_candidate_failure(full, {disk(0, 3ULL << 30)}));
  auto crash = candidate_stage(Verdict::RuntimeError, Response::Status::Died, "",
                               "the worker closed its channel: No space left on device");
  EXPECT_FALSE(classify_candidate_failure(crash, {disk(0)}));
  auto hang =
      candidate_stage(Verdict::Timeout, Response::Status::Timeout, "", "No space left on device");
  EXPECT_FALSE(classify_candidate_failure(hang, {disk(0)}));
  auto quota =
      candidate_stage(Verdict::RuntimeError, Response::Status::Error, "scratch_quota_exceeded",
                      "scratch quota exceeded: No space left on device");
  EXPECT_FALSE(classify_candidate_failure(quota, {disk(0)}));
  ASSERT_TRUE(disk_filled_by_candidate({disk(10ULL << 30), disk(0, 3ULL << 30)}));
  EXPECT_FALSE(disk_filled_by_candidate({disk(0, 1 << 20)}));
}

TEST(HarnessFault, TheResultRecordsTheFaultAndItsReason) {
  Result r;
  r.verdict = Verdict::HarnessError;
  HarnessFault fault{FaultKind::ReferenceCrashed, "drawing the hidden cases",
                     "the worker closed its channel\nlog tail"};
  r.reason = fault.reason();
  r.harness_fault = fault;
  auto j = r.to_json();
  EXPECT_EQ(j["verdict"], "harness_error");
  EXPECT_EQ(j["harness_fault"]["kind"], "reference_crashed");
  EXPECT_EQ(j["harness_fault"]["stage"], "drawing the hidden cases");
  EXPECT_NE(r.reason.find("reference_crashed"), std::string::npos);
  EXPECT_EQ(r.reason.find("log tail"), std::string::npos);  // one line
  EXPECT_FALSE(Result().to_json().contains("harness_fault"));
}

}  // namespace
}  // namespace kbv::judge
