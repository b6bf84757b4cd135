#include "eval/reference_session.hpp"

#include <system_error>

#include "core/hash.hpp"

namespace kbv::eval {
using nlohmann::json;

json ReferenceKey::to_json() const {
  return {{"problem_sha256", problem_sha256},
          {"device", device},
          {"protocol", protocol},
          {"protocol_version", protocol_version},
          {"draws", draws},
          {"size", size},
          {"kbv_version", kbv_version},
          {"software", software},
          {"secret_sha256", secret_sha256}};
}

std::string ReferenceKey::digest() const { return sha256_hex(to_json().dump()); }

bool ReferenceKey::same_request(const ReferenceKey& other) const {
  return problem_sha256 == other.problem_sha256 && device == other.device &&
         protocol == other.protocol && protocol_version == other.protocol_version &&
         draws == other.draws && size == other.size && kbv_version == other.kbv_version;
}

json software_of(const json& environment) {
  json out = json::object();
  if (!environment.is_object()) return out;
  for (const char* field : {"python", "torch", "cuda_runtime", "cudnn", "driver", "device_name",
                            "compute_capability", "platform"}) {
    if (environment.contains(field)) out[field] = environment[field];
  }
  return out;
}

ReferenceSession::~ReferenceSession() {
  // A preparation still running uses the worker: it ends first (its calls are bounded by the
  // reference timeout; a session is dropped unused only when its task went elsewhere).
  if (preparing.joinable()) preparing.join();
  if (worker) worker->stop();
  ahead_memory.reset();  // its memory is the stopped worker's: free now
  if (!keep_run_dir && !run_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(run_dir, ec);
  }
}

json ReferenceSession::record(bool reused) const {
  json out = {{"key", key.digest()},
              {"reused", reused},
              {"preparations", preparations},
              {"candidate_index", candidates}};
  if (from_spare) out["from_spare"] = true;
  if (plan) out["plan"] = plan->to_json();
  return out;
}

}  // namespace kbv::eval
