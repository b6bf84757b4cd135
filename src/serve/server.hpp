// `kbv serve`: wires the service's parts together and runs until SIGTERM or SIGINT, then drains
// (in-flight evaluations finish and are stored, new work gets 503, queued work stays on disk for
// the next start). docs/serve.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "eval/eval_request.hpp"
#include "serve/service.hpp"

namespace kbv::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";  // loopback unless the operator says otherwise
  int port = 8000;                 // 0: any free port (printed)
  std::filesystem::path token_file;
  std::filesystem::path database = "results.sqlite";
  std::vector<std::string> devices;  // empty: the server request's device
  int workers_per_device = 1;
  // What evaluates the queue: a kind of serve/evaluators.hpp ("local", or "ray" with `ray`).
  std::string evaluators = "local";
  RaySettings ray;
  int build_jobs = 1;  // candidates built at once ahead of evaluation (0: none)
  size_t max_queue = 1024;
  size_t max_body_bytes = 16u << 20;
  int http_threads = 64;
  ServiceLimits service;
  // Settings (the defaults of every request), limits (the most a request may ask) and placement
  // (build cache, work folder, progress lines).
  eval::EvalRequest server;
};

// Returns the exit status (0 after a drain). Throws eval::UsageError for a missing or empty token
// file or an address it cannot listen on.
int serve(const ServeOptions& options);

}  // namespace kbv::serve
