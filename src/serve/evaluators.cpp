#include "serve/evaluators.hpp"

#include <fmt/format.h>

#include <regex>

#include "serve/eval_pool.hpp"
#include "serve/ray_pool.hpp"

namespace kbv::serve {

const std::vector<EvaluatorsKind>& evaluators_kinds() {
  static const std::vector<EvaluatorsKind> kinds = {
      {"local", /*builds_here=*/true,
       [](JobQueue& queue, store::Store& db, PoolSettings settings) -> std::unique_ptr<Evaluators> {
         return std::make_unique<EvalPool>(queue, db, std::move(settings));
       }},
      {"ray", /*builds_here=*/false,
       [](JobQueue& queue, store::Store& db, PoolSettings settings) -> std::unique_ptr<Evaluators> {
         return std::make_unique<RayPool>(queue, db, std::move(settings));
       }},
  };
  return kinds;
}

const EvaluatorsKind& evaluators_kind(std::string_view name) {
  std::string known;
  for (const auto& kind : evaluators_kinds()) {
    if (kind.name == name) return kind;
    known += (known.empty() ? "" : ", ") + std::string(kind.name);
  }
  throw eval::UsageError(fmt::format("no evaluators named '{}' (there are: {})", name, known));
}

eval::EvalRequest job_request(const eval::EvalRequest& server, const Job& job,
                              const std::string& device) {
  eval::EvalRequest request = server;
  request.problem = job.problem_file;
  request.candidate = job.candidate_file;
  request.settings = job.spec.settings;
  request.settings.device = device;
  request.settings.sandbox = server.settings.sandbox;  // the operator's, never a request's
  request.limits = job.spec.limits;
  request.placement.progress = nullptr;
  return request;
}

std::string job_store_key(const eval::EvalRequest& server, const JobSpec& spec,
                          const std::string& problem_sha256, const std::string& candidate_sha256,
                          const std::string& device) {
  eval::EvalSettings settings = spec.settings;
  settings.device = device;
  settings.sandbox = server.settings.sandbox;
  return store::run_key(problem_sha256, candidate_sha256, settings.key());
}

store::RowInfo job_row_info(const std::string& key, const JobSpec& spec) {
  store::RowInfo row{key, spec.run, spec.problem_name, std::nullopt, std::nullopt, std::nullopt};
  static const std::regex layout(R"(level(\d+)/(\d+)_.*)");
  std::smatch m;
  if (std::regex_match(spec.problem_name, m, layout)) {
    row.level = std::stoi(m[1]);
    row.problem_id = std::stoi(m[2]);
  }
  return row;
}

}  // namespace kbv::serve
