#include "judge/stage_failure.hpp"

#include <fmt/format.h>

#include "judge/harness_fault.hpp"

namespace kbv::judge {
using orchestrate::Response;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

namespace {
void keep_answer(FailedStage& out, const Response& r, std::string stage) {
  out.stage = std::move(stage);
  out.status = r.status;
  out.error_kind = r.error_kind;
  out.names_disk_full = names_disk_full(r);
}
}  // namespace

FailedStage load_failure(const Response& r, std::chrono::seconds compile_timeout) {
  FailedStage out;
  if (r.status == Response::Status::Timeout) {
    out.failure = {Verdict::Timeout,
                   fmt::format("building and importing the candidate did not finish within {} s",
                               compile_timeout.count())};
  } else if (r.status == Response::Status::Died) {
    out.failure = {Verdict::RuntimeError,
                   "the candidate's process died while importing: " + r.message};
  } else if (r.error_kind == "compile_error") {
    out.failure = {Verdict::CompileError, first_line(r.message)};
  } else {
    out.failure = {Verdict::RuntimeError, first_line(r.message)};
  }
  out.detail = r.detail.empty() ? r.message : r.message + "\n" + r.detail;
  keep_answer(out, r, "building and importing the candidate");
  return out;
}

FailedStage call_failure(const Response& r, const std::string& during) {
  FailedStage out;
  if (r.status == Response::Status::Timeout) {
    out.failure = {Verdict::Timeout,
                   fmt::format("the candidate {} during {}: it was killed", r.message, during)};
  } else if (r.status == Response::Status::Died) {
    out.failure = {Verdict::RuntimeError, fmt::format("{} during {}", r.message, during)};
  } else {
    out.failure = {Verdict::RuntimeError, fmt::format("{} ({})", first_line(r.message), during)};
  }
  out.detail = r.detail;
  keep_answer(out, r, during);
  return out;
}

bool reads_unmapped_memory(const Response& r) {
  if (r.status == Response::Status::Died) {
    return r.message.find("SIGSEGV") != std::string::npos ||
           r.message.find("SIGBUS") != std::string::npos;
  }
  if (r.status != Response::Status::Error) return false;
  for (const std::string* text : {&r.message, &r.detail}) {
    for (const char* sign :
         {"illegal memory access", "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"}) {
      if (text->find(sign) != std::string::npos) return true;
    }
  }
  return false;
}

}  // namespace kbv::judge
