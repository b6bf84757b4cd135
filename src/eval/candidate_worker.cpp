#include "eval/candidate_worker.hpp"

#include "eval/workspace.hpp"
#include "orchestrate/build_cache.hpp"
#include "orchestrate/worker_options.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;

CandidateWorker::~CandidateWorker() {
  if (process) process->stop();
  if (!keep_folder && !folder.empty()) {
    std::error_code ec;
    fs::remove_all(folder, ec);
  }
}

std::shared_ptr<CandidateWorker> start_candidate_worker(const EvalRequest& request,
                                                        const std::string& candidate_sha256) {
  auto worker = std::make_shared<CandidateWorker>();
  worker->candidate = fs::absolute(request.candidate);
  worker->keep_folder = request.placement.keep_work_dir;
  auto dir = make_private_dir(request.placement.work_dir, "kbv-cand", {"scratch"},
                              request.placement.keep_work_dir);
  worker->folder = dir.path;
  worker->owner = std::move(dir.owner);
  fs::path cache = orchestrate::extension_cache_dir(request.placement.cache_dir, candidate_sha256,
                                                    request.settings.device);
  fs::create_directories(cache);
  orchestrate::make_scratch_folders(worker->folder / "scratch");
  orchestrate::WorkerSpec spec;
  spec.kind = orchestrate::WorkerKind::Candidate;
  spec.size = request.settings.size;
  spec.sandbox = request.settings.sandbox;
  spec.folder = worker->folder;
  spec.candidate_file = worker->candidate;
  spec.extension_cache = cache;
  spec.scratch_quota_bytes = request.limits.max_scratch_bytes;
  spec.compile_timeout = request.limits.compile_timeout;
  spec.max_host_memory_bytes = request.limits.max_host_memory_bytes;
  spec.cuda = request.settings.cuda();
  worker->process = std::make_unique<orchestrate::WorkerProcess>(orchestrate::worker_options(spec));
  return worker;
}

}  // namespace kbv::eval
