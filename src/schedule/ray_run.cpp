#include "schedule/ray_run.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "core/clock.hpp"
#include "schedule/ray_driver.hpp"
#include "store/ingest.hpp"

namespace kbv::schedule {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path relative_to(const fs::path& path, const fs::path& root) {
  return fs::absolute(path).lexically_normal().lexically_relative(
      fs::absolute(root).lexically_normal());
}

// The plan file, removed when the run ends.
struct PlanFile {
  fs::path path;
  PlanFile(const fs::path& folder, const json& plan)
      : path(folder / fmt::format("kbv-ray-plan-{}.json", ::getpid())) {
    fs::create_directories(folder);
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + path.string());
    const auto text = plan.dump(1);
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !written) throw std::runtime_error("cannot write " + path.string());
  }
  ~PlanFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// Stores the rows the driver relays and keeps the run's counts, as kbv run's device threads do.
class RowSink {
 public:
  RowSink(const WorkList& work, store::Store& db, SuiteSummary& summary,
          const std::function<void(const std::string&)>& progress)
      : work_(work), db_(db), summary_(summary), progress_(progress), started_(Clock::now()) {
    for (size_t i = 0; i < work.keys.size(); ++i) planned_[work.keys[i]] = i;
  }

  void take(const json& event) {
    const std::string kind = event.value("event", "");
    if (kind == "row") {
      return store_row(event.at("row"), event.value("node", "?"), event.value("node_id", ""));
    }
    if (kind == "missing") return note_missing(event);
  }

 private:
  void log(const std::string& line) const {
    if (progress_) progress_(line);
  }

  // `node` names the node in progress lines (its address); `node_id` tells nodes apart (several
  // may share an address).
  void store_row(json row, const std::string& node, const std::string& node_id) {
    const std::string key = row.at("_row").value("key", "");
    const auto planned = planned_.find(key);
    if (planned == planned_.end()) {
      // Keys are content keys over the files and settings, kbv's version included: a node whose
      // kbv differs stores keys no plan holds. Its rows would be another run's.
      if (unplanned_.insert(key).second) {
        log(
            fmt::format("a row from {} under key {} matches no task of this run (is the node's "
                        "kbv the same version as this one?): not stored",
                        node, key.substr(0, 12)));
      }
      return;
    }
    const Task& task = *work_.tasks[planned->second];
    // The node evaluated its copies of the files; the row names this machine's, as a one-machine
    // run's would.
    if (row.contains("candidate") && row["candidate"].is_object()) {
      row["candidate"]["path"] = fs::absolute(task.candidate.path).string();
    }
    if (row.contains("problem") && row["problem"].is_object()) {
      row["problem"]["path"] = fs::absolute(task.problem.path).string();
    }
    // The first row of a key in this run is the evaluation the plan asked for: it replaces a
    // result stored before (one evaluated again), as kbv run's would. A second is merge's case.
    const auto stored = store::ingest_row(db_, row, /*evaluated_again=*/!done_.count(key));
    if (stored.outcome == store::Ingested::Outcome::Duplicate) return;
    if (!stored.written()) {
      log(fmt::format("{} {}: a second, different result came back and was not kept ({})",
                      task.candidate.run, task.candidate.path.filename().string(), stored.why));
      return;
    }
    if (!done_.insert(key).second) {
      log(fmt::format("{} {}: a second, different result replaced the first ({})",
                      task.candidate.run, task.candidate.path.filename().string(), stored.why));
      return;  // counted once
    }
    nodes_.insert(node_id.empty() ? node : node_id);
    const std::string verdict = row.value("verdict", "unknown");
    ++summary_.evaluated;
    summary_.verdicts[verdict] += 1;
    if (verdict == "harness_error") {
      const auto fault = row.value("harness_fault", json::object());
      summary_.harness_errors.push_back({task.candidate.path,
                                         fault.is_object() ? fault.value("kind", "") : "",
                                         row.value("reason", ""), true});
    }
    const auto durations = row.value("durations_s", json::object());
    if (durations.is_object() && durations.contains("split") && durations["split"].is_object()) {
      for (const auto& [part, value] : durations["split"].items()) {
        if (value.is_number()) {
          summary_.split[part] = summary_.split.value(part, 0.0) + value.get<double>();
        }
      }
    }
    const size_t total = work_.tasks.size(), finished = done_.size();
    // The time per result so far, over what is still to come (tasks given up on are not).
    const double per = seconds_since(started_) / static_cast<double>(finished);
    const size_t to_come = total - std::min(total, finished + given_up_.size());
    log(fmt::format("[{}/{}] {} {} on {}: {} | {} | ETA {:.0f} s", finished, total,
                    task.candidate.run, task.candidate.path.filename().string(), node, verdict,
                    verdict_counts(summary_.verdicts), per * static_cast<double>(to_come)));
  }

  // A shard that ended without some of its rows: its problem could not be evaluated there (kbv
  // on the node said why) or its node kept failing. Nothing is stored: a rerun retries them.
  void note_missing(const json& event) {
    const auto keys = event.value("keys", json::array());
    for (const auto& key : keys) {
      const auto planned = planned_.find(key.get<std::string>());
      if (planned == planned_.end() || done_.count(planned->first)) continue;
      given_up_.insert(planned->first);
      const auto& problem = work_.tasks[planned->second]->problem.path;
      if (missing_problems_.insert(problem).second) {
        summary_.broken_problems.push_back({problem, event.value("why", "no result came back")});
      }
    }
  }

 public:
  int nodes() const { return static_cast<int>(nodes_.size()); }

 private:
  const WorkList& work_;
  store::Store& db_;
  SuiteSummary& summary_;
  const std::function<void(const std::string&)>& progress_;
  Clock::time_point started_;
  std::map<std::string, size_t> planned_;  // key -> its index in work_
  std::set<std::string> done_, unplanned_, given_up_;
  std::set<std::string> nodes_;
  std::set<fs::path> missing_problems_;
};

}  // namespace

json ray_plan(const WorkList& work, const SuiteRequest& suite, const RayRunRequest& ray) {
  json shards = json::array();
  std::map<fs::path, size_t>
      shard_of;  // problem -> its shard (work lists a problem's tasks in a row)
  for (size_t i = 0; i < work.tasks.size(); ++i) {
    const Task& t = *work.tasks[i];
    auto [at, added] = shard_of.emplace(t.problem.path, shards.size());
    if (added) {
      shards.push_back(
          {{"problem",
            {{"path", fs::absolute(t.problem.path).string()},
             {"relative", relative_to(t.problem.path, suite.problems).generic_string()}}},
           {"tasks", json::array()}});
    }
    shards[at->second]["tasks"].push_back(
        {{"key", work.keys[i]},
         {"path", fs::absolute(t.candidate.path).string()},
         {"relative", relative_to(t.candidate.path, suite.candidates).generic_string()}});
  }
  const auto& device = suite.settings.settings.device;
  return {{"address", ray.address},
          {"device", device.starts_with("cuda") ? "cuda" : "cpu"},
          {"node_arguments", ray.node_arguments},
          {"attempts", ray.attempts},
          {"quiet", !suite.settings.placement.progress},
          {"shards", shards}};
}

SuiteSummary run_on_ray(const SuiteRequest& suite, const RayRunRequest& ray) {
  SuiteSummary summary;
  const auto& progress = suite.settings.placement.progress;
  auto log = [&](const std::string& line) {
    if (progress) progress(line);
  };
  for (const auto& [what, folder] :
       {std::pair{"problem", &suite.problems}, std::pair{"candidate", &suite.candidates}}) {
    if (!fs::exists(*folder)) {
      throw eval::UsageError(fmt::format("{} folder {} does not exist", what, folder->string()));
    }
  }
  const auto found = pair_candidates(find_problems(suite.problems), suite.candidates);
  summary.unmatched = found.unmatched;
  summary.suite_tasks = summary.tasks = static_cast<int>(found.tasks.size());
  std::set<fs::path> problems;
  for (const auto& t : found.tasks) problems.insert(t.problem.path);
  summary.shard_problems = static_cast<int>(problems.size());
  for (const auto& u : found.unmatched) {
    log(fmt::format("skipped {}: {}", u.path.string(), u.reason));
  }

  store::Store db(suite.database);
  const WorkList work = work_left(found.tasks, db, suite, summary);
  const json plan = ray_plan(work, suite, ray);
  const size_t shards = plan["shards"].size();
  log(
      fmt::format("{} tasks: {} already in {}, {} to evaluate on the Ray cluster at {} ({} "
                  "shard{}, one per problem)",
                  summary.tasks, summary.already_done, suite.database.string(), work.tasks.size(),
                  ray.address, shards, shards == 1 ? "" : "s"));
  if (work.tasks.empty()) return summary;

  const auto started = Clock::now();
  const auto& work_dir = suite.settings.placement.work_dir;
  PlanFile plan_file(work_dir.empty() ? fs::temp_directory_path() : work_dir, plan);
  RowSink sink(work, db, summary, progress);
  RayDriverProcess driver("kbv.ray_run", {"--plan", plan_file.path.string()});
  std::string line;
  while (driver.next(line)) {
    const json event = json::parse(line, nullptr, false);
    if (event.is_discarded() || !event.is_object()) {
      log(fmt::format("ray driver: {}", line));  // not an event: shown, not lost
      continue;
    }
    try {
      sink.take(event);
    } catch (const store::IngestError& error) {
      log(fmt::format("ray driver: a row that cannot be stored ({}): skipped", error.what()));
    } catch (const json::exception& error) {
      log(fmt::format("ray driver: an event that cannot be read ({}): skipped", error.what()));
    }
  }
  const int status = driver.wait();
  summary.evaluation_seconds = seconds_since(started);
  summary.ray_nodes = sink.nodes();
  if (status == 2 || status == 127) {  // its usage errors (no Ray, no cluster), no Python
    throw eval::UsageError("the Ray driver stopped (above: why); nothing more was stored");
  }
  if (status != 0) {
    throw std::runtime_error(fmt::format(
        "the Ray driver ended with status {}; the rows it relayed are stored, a rerun evaluates "
        "the rest",
        status));
  }
  return summary;
}

}  // namespace kbv::schedule
