#include "eval/suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/hash.hpp"
#include "eval/device_gate.hpp"
#include "eval/reference_session.hpp"
#include "eval/task_picker.hpp"
#include "orchestrate/worker_process.hpp"
#include "store/store.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

fs::path extension_cache_dir(const fs::path& cache_root, const fs::path& candidate,
                             const std::string& device) {
  return cache_root / "torch_extensions" /
         fmt::format("{}-{}", sha256_file(candidate).substr(0, 24),
                     device.starts_with("cuda") ? "cuda" : "cpu");
}

bool builds_on_import(const fs::path& candidate) {
  std::ifstream in(candidate, std::ios::binary);
  if (!in) return true;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find("cpp_extension") != std::string::npos ||
         text.find("load_inline") != std::string::npos;
}

// More evaluations per GPU than this wait on each other's timing runs more than they gain: on
// the H200 (16 cores), 8 per GPU waited about 4 times as long for the gate as 4 per GPU and ran
// slower (docs/results/issue4-suite-bench-h200.md).
constexpr int kMaxDefaultWorkersPerGpu = 4;

int default_workers_per_device(const std::string& device, int cuda_devices, unsigned cores) {
  if (!device.starts_with("cuda")) return 1;
  int per = static_cast<int>(cores) / (2 * std::max(1, cuda_devices));
  return std::clamp(per, 2, kMaxDefaultWorkersPerGpu);
}

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Everything besides the two files' content that changes a result.
json settings_of(const EvalRequest& r) {
  return {{"protocol", r.protocol},
          {"device", r.device.starts_with("cuda") ? "cuda" : "cpu"},
          {"size", r.size},
          {"draws", r.hidden_draws},
          {"timing_profile", r.timing_profile},
          {"samples", r.timing_samples},
          {"rounds", r.timing_rounds},
          {"measure", r.measure},
          {"kbv", std::string(kVersion)}};
}

// Written into a candidate's cache folder once a build-ahead import of it succeeded: a warm
// run starts no build worker for it (torch's own check still guards the library itself).
constexpr const char* kBuiltMarker = ".kbv-built";

// Build workers' niceness: below the evaluations, so a timing run never waits for a core behind
// a compiler; the builds still take every core the evaluations leave idle.
constexpr int kBuildNice = 10;

// Builds candidates ahead of evaluation, `jobs` at a time, each in its own sandboxed worker:
// the worker only imports the file, which compiles its extensions into the content-keyed cache.
// A failed build is not an error here: the evaluation reports it as compile_error.
// Builds go in the order of `tasks` (the evaluation order), and each is announced through
// `built` (cache folder, wall seconds; 0 for one already built) as soon as it ends, so evaluation
// starts with the first build instead of the last.
// `caches[i]` is the build-cache folder of `tasks[i]`.
void build_ahead(const std::vector<const orchestrate::Task*>& tasks,
                 const std::vector<fs::path>& caches, const SuiteRequest& request, fs::path scratch,
                 const std::function<void(const fs::path&, double)>& built) {
  struct Pending {
    const orchestrate::Task* task;
    fs::path cache;
  };
  std::deque<Pending> queue;
  std::set<fs::path> seen;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const fs::path& dir = caches[i];
    if (!seen.insert(dir).second) continue;
    if (fs::exists(dir / kBuiltMarker) || !builds_on_import(tasks[i]->candidate.path)) {
      built(dir, 0.0);
    } else {
      queue.push_back({tasks[i], dir});
    }
  }
  struct Running {
    std::unique_ptr<orchestrate::WorkerProcess> worker;
    Clock::time_point started;
    fs::path cache;
  };
  std::vector<Running> running;
  size_t done = 0, total = queue.size();
  int index = 0;
  while (!queue.empty() || !running.empty()) {
    while (!queue.empty() && static_cast<int>(running.size()) < std::max(1, request.build_jobs)) {
      const auto [task, cache] = queue.front();
      queue.pop_front();
      orchestrate::WorkerOptions options;
      options.role = "candidate";
      options.python = orchestrate::locate_python();
      options.pythonpath = orchestrate::locate_pythonpath();
      auto dir = scratch / fmt::format("build-{}", index++);
      fs::create_directories(dir);
      options.working_directory = dir;
      options.log_file = dir / "build.log";
      fs::create_directories(cache);
      options.environment = {{"TORCH_EXTENSIONS_DIR", cache.string()},
                             {"TMPDIR", dir.string()},
                             {"XDG_CACHE_HOME", dir.string()},
                             {"KBV_SIZE", request.settings.size},
                             {"PYTHONDONTWRITEBYTECODE", "1"}};
      options.nice = kBuildNice;
      options.sandbox.enabled = request.settings.sandbox;
      options.sandbox.writable = {dir, cache};
      options.sandbox.max_new_processes = 512;
      options.sandbox.quota_dir = dir;
      options.sandbox.quota_bytes = request.settings.max_scratch_bytes;
      auto worker = std::make_unique<orchestrate::WorkerProcess>(options);
      worker->send({{"cmd", "import"}, {"candidate", fs::absolute(task->candidate.path).string()}});
      running.push_back({std::move(worker), Clock::now(), cache});
    }
    for (auto it = running.begin(); it != running.end();) {
      bool timed_out = since(it->started) > request.settings.compile_timeout.count();
      if (it->worker->ready(std::chrono::milliseconds(50)) || timed_out) {
        if (!timed_out && it->worker->receive(std::chrono::milliseconds(1000)).ok()) {
          std::ofstream(it->cache / kBuiltMarker) << "built\n";
        }
        it->worker->stop();
        built(it->cache, since(it->started));
        it = running.erase(it);
        ++done;
        if (request.settings.progress) {
          request.settings.progress(fmt::format("built {}/{} candidates", done, total));
        }
      } else {
        ++it;
      }
    }
  }
}

// What the evaluation threads know of the builds running beside them.
class BuildBoard {
 public:
  void built(const fs::path& cache, double seconds) {
    {
      std::lock_guard guard(mutex_);
      seconds_[cache] = seconds;
    }
    changed_.notify_all();
  }
  void finish() {
    {
      std::lock_guard guard(mutex_);
      finished_ = true;
    }
    changed_.notify_all();
  }
  bool is_built(const fs::path& cache) {
    std::lock_guard guard(mutex_);
    return ended(cache);
  }
  // Waits until this candidate's build ended (or every build did); returns its wall seconds.
  double wait(const fs::path& cache) {
    std::unique_lock guard(mutex_);
    changed_.wait(guard, [&] { return ended(cache); });
    auto it = seconds_.find(cache);
    return it == seconds_.end() ? 0.0 : it->second;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool ended(const fs::path& cache) const { return finished_ || seconds_.count(cache) != 0; }

  std::map<fs::path, double> seconds_;
  bool finished_ = false;
};

// After a crash or hang on a GPU: can a fresh process still allocate, compute and synchronise
// there? A wedged device must not turn every later candidate into a failure.
bool device_healthy(const std::string& device) {
  std::string command = "timeout 60 " + orchestrate::locate_python() +
                        " -c 'import torch; x = torch.ones(1024, device=\"" + device +
                        "\"); torch.cuda.synchronize(); assert float(x.sum()) == 1024' "
                        ">/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

std::string counts(const std::map<std::string, int>& verdicts) {
  std::string out;
  for (const auto& [verdict, n] : verdicts)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", verdict, n);
  return out.empty() ? "none yet" : out;
}

}  // namespace

SuiteSummary run_suite(const SuiteRequest& request) {
  SuiteSummary summary;
  auto log = [&](const std::string& line) {
    if (request.settings.progress) request.settings.progress(line);
  };
  if (!fs::exists(request.problems)) {
    throw UsageError(fmt::format("problem folder {} does not exist", request.problems.string()));
  }
  if (!fs::exists(request.candidates)) {
    throw UsageError(
        fmt::format("candidate folder {} does not exist", request.candidates.string()));
  }
  auto problems = orchestrate::find_problems(request.problems);
  auto found = orchestrate::pair_candidates(problems, request.candidates);
  summary.unmatched = found.unmatched;
  summary.tasks = static_cast<int>(found.tasks.size());
  for (const auto& u : found.unmatched)
    log(fmt::format("skipped {}: {}", u.path.string(), u.reason));

  store::Store db(request.database);
  json settings = settings_of(request.settings);
  std::vector<const orchestrate::Task*> todo;
  std::vector<std::string> keys;
  // Candidates of one problem in a row, so each device's kept reference serves them all.
  std::vector<const orchestrate::Task*> ordered;
  for (const auto& task : found.tasks) ordered.push_back(&task);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto* a, const auto* b) { return a->problem.path < b->problem.path; });
  for (const auto* task_ptr : ordered) {
    const auto& task = *task_ptr;
    auto key =
        store::run_key(sha256_file(task.problem.path), sha256_file(task.candidate.path), settings);
    if (db.has(key)) {
      ++summary.already_done;
    } else {
      todo.push_back(&task);
      keys.push_back(key);
    }
  }
  log(fmt::format("{} tasks: {} already in {}, {} to evaluate", summary.tasks, summary.already_done,
                  request.database.string(), todo.size()));
  if (todo.empty()) return summary;

  auto scratch_root =
      request.settings.work_dir.empty() ? fs::temp_directory_path() : request.settings.work_dir;
  auto scratch = scratch_root / fmt::format("kbv-build-{}", ::getpid());
  auto started = Clock::now();
  BuildBoard builds;
  std::mutex lock;  // guards the picker, the summary, the broken-problem set and the log
  // Each task's build-cache folder, once: it hashes the candidate file, and the picker asks
  // for every waiting task at every pick.
  std::vector<fs::path> caches;
  for (const auto* task : todo) {
    caches.push_back(extension_cache_dir(request.settings.cache_dir, task->candidate.path,
                                         request.settings.device));
  }
  // Builds run beside the evaluation: each candidate waits only for its own.
  SuiteRequest build_request = request;  // its progress lines go through the run's lock
  if (request.settings.progress) {
    build_request.settings.progress = [&](const std::string& line) {
      std::lock_guard guard(lock);
      request.settings.progress(line);
    };
  }
  std::thread builder([&] {
    try {
      build_ahead(todo, caches, build_request, scratch,
                  [&](const fs::path& cache, double seconds) { builds.built(cache, seconds); });
    } catch (const std::exception& error) {
      std::lock_guard guard(lock);
      log(fmt::format("building ahead stopped: {}; candidates build as they are evaluated",
                      error.what()));
    }
    builds.finish();
    std::error_code ec;
    fs::remove_all(scratch, ec);
    summary.build_seconds = since(started);
  });

  auto devices =
      request.devices.empty() ? std::vector<std::string>{request.settings.device} : request.devices;
  // Several evaluations per device share it through its gate: only timing is exclusive.
  std::map<std::string, std::unique_ptr<DeviceGate>> gates;
  std::vector<std::string> threads_on;
  const int cuda_devices = static_cast<int>(std::count_if(
      devices.begin(), devices.end(), [](const std::string& d) { return d.starts_with("cuda"); }));
  for (const auto& device : devices) {
    auto& gate = gates[device];
    if (!gate) gate = std::make_unique<DeviceGate>();
    int per =
        request.workers_per_device > 0
            ? request.workers_per_device
            : default_workers_per_device(device, cuda_devices, std::thread::hardware_concurrency());
    for (int k = 0; k < per; ++k) threads_on.push_back(device);
  }
  std::set<fs::path> broken_problems;
  TaskPicker picker(todo);
  size_t finished = 0;
  std::set<fs::path> compile_counted;  // a build shared by identical files counts once
  std::set<std::string> unhealthy;     // devices that failed a health check
  auto worker = [&](const std::string& device) {
    ReferenceSlot reference;  // this thread's kept reference work, one problem at a time
    int sessions_counted = 0;
    fs::path current;  // the problem of the last task taken
    DeviceGate* gate = gates.at(device).get();
    bool shared_device = std::count(threads_on.begin(), threads_on.end(), device) > 1;
    auto request_for = [&](size_t k) {
      EvalRequest eval = request.settings;
      eval.problem = todo[k]->problem.path;
      eval.candidate = todo[k]->candidate.path;
      eval.device = device;
      eval.progress = nullptr;  // one line per candidate, not per stage
      eval.reference = &reference;
      // Always through the gate: besides other evaluations on the device, the reference of the
      // next problem prepares ahead on it, and a timing run must exclude both.
      eval.gate = gate;
      return eval;
    };
    // The thread's next task, taken when the current one starts, and its candidate's worker,
    // started then: the process start and torch import (3.6 s per evaluation on the H200,
    // docs/results/issue4-suite-bench-h200.md) overlap the current evaluation.
    std::optional<size_t> next;
    std::shared_ptr<CandidateWorker> next_worker;
    auto stop = [&] {
      if (next) picker.put_back(*next);
      picker.leave(current);
    };
    auto built = [&](size_t k) { return builds.is_built(caches[k]); };
    while (true) {
      size_t i;
      // Workers are stopped (destroyed) outside the lock: stopping one may take a moment.
      std::shared_ptr<CandidateWorker> ahead, dropped;
      {
        std::lock_guard guard(lock);
        if (unhealthy.count(device)) {
          stop();
          return;
        }
        std::optional<size_t> picked;
        if (next && picker.claim(*next)) {
          picked = next;
          ahead = std::move(next_worker);
        }
        dropped = std::move(next_worker);  // its task was stolen by an idle thread
        next.reset();
        if (!picked) picked = picker.pick(current, broken_problems, built);
        if (!picked) picked = picker.steal(current);
        if (!picked) {
          stop();
          return;
        }
        i = *picked;
        current = todo[i]->problem.path;
        if (broken_problems.count(current)) continue;
        next = picker.pick(current, broken_problems, built, /*reserve=*/true);
        if (next) current = todo[*next]->problem.path;
      }
      if (next) {
        try {
          next_worker = start_candidate_worker(request_for(*next));
        } catch (const std::exception&) {
          next_worker.reset();  // started again, and its failure reported, in its evaluation
        }
      }
      // Likewise the reference of the next task's problem when it is not this task's: its
      // worker starts now, loads the problem and draws its cases beside this evaluation. Only
      // sessions for this task and the next are kept.
      const fs::path this_problem = fs::absolute(todo[i]->problem.path);
      std::optional<fs::path> next_problem;
      if (next) next_problem = fs::absolute(todo[*next]->problem.path);
      std::erase_if(reference.ahead, [&](const auto& entry) {
        return entry.first != this_problem && entry.first != next_problem;
      });
      if (next_problem && *next_problem != this_problem &&
          !reference.ahead.contains(*next_problem)) {
        try {
          reference.ahead[*next_problem] = start_reference_session(request_for(*next));
        } catch (const std::exception&) {
          // Nothing was kept (the session is made before the entry): started in its evaluation.
        }
      }
      const auto& task = *todo[i];
      double built_in = builds.wait(caches[i]);
      EvalRequest eval = request_for(i);
      eval.prestarted = std::move(ahead);
      Result result;
      try {
        result = evaluate(eval);
        eval.prestarted.reset();  // the evaluation stopped it; this frees its folder now
        // A failure while other evaluations shared the device may be theirs (device memory
        // taken, a hang slowing every context): the candidate is evaluated again with the
        // device to itself, and that verdict stands.
        if (shared_device &&
            (result.verdict == Verdict::RuntimeError || result.verdict == Verdict::Timeout)) {
          auto alone = gate->exclusive();
          EvalRequest solo = eval;
          solo.gate = nullptr;
          solo.prestarted = nullptr;
          std::string first =
              fmt::format("{}: {}", to_string(result.verdict), first_line(result.reason));
          result = evaluate(solo);
          result.add_flag("evaluated_alone", Severity::Info,
                          fmt::format("with the device shared the first attempt ended {}; this "
                                      "verdict is from a second attempt with the device alone",
                                      first));
        }
      } catch (const UsageError& error) {
        // A broken problem is no candidate's fault: nothing is stored, a rerun retries it.
        std::lock_guard guard(lock);
        if (broken_problems.insert(task.problem.path).second) {
          summary.broken_problems.push_back({task.problem.path, error.what()});
          log(fmt::format("problem {} cannot be evaluated: {}", task.problem.path.string(),
                          error.what()));
        }
        continue;
      } catch (const std::exception& error) {
        // A fault inside kbv on this one task (the evaluator turns the candidate's own doings
        // into verdicts) must not end every other evaluation of the run: it is reported,
        // nothing is stored, and a rerun retries the task.
        std::lock_guard guard(lock);
        summary.failed_inside_kbv.push_back({task.candidate.path, error.what()});
        log(fmt::format("evaluating {} failed inside kbv: {}; nothing stored, a rerun retries it",
                        task.candidate.path.string(), error.what()));
        continue;
      }
      {
        // The build ahead of evaluation is this result's compile time too.
        std::lock_guard guard(lock);
        double ahead = compile_counted.insert(caches[i]).second ? built_in : 0.0;
        auto& split = result.durations_s["split"];
        result.durations_s["build_ahead"] = ahead;
        split["compile"] = split.value("compile", 0.0) + ahead;
        for (const auto& [part, value] : split.items()) {
          summary.split[part] = summary.split.value(part, 0.0) + value.get<double>();
        }
        summary.reference_sessions += reference.sessions_started - sessions_counted;
        sessions_counted = reference.sessions_started;
      }
      store::RowInfo info{keys[i],
                          task.candidate.run,
                          task.problem.name,
                          task.candidate.level,
                          task.candidate.problem_id,
                          task.candidate.sample};
      db.put(info, result.to_json());
      bool healthy = true;
      if (device.starts_with("cuda") &&
          (result.verdict == Verdict::RuntimeError || result.verdict == Verdict::Timeout)) {
        healthy = device_healthy(device);
      }
      std::lock_guard guard(lock);
      ++summary.evaluated;
      ++finished;
      summary.verdicts[std::string(to_string(result.verdict))] += 1;
      double per =
          since(started) / static_cast<double>(finished) / static_cast<double>(devices.size());
      log(fmt::format("[{}/{}] {} {} on {}: {} | {} | ETA {:.0f} s", finished, todo.size(),
                      task.candidate.run, task.candidate.path.filename().string(), device,
                      to_string(result.verdict), counts(summary.verdicts),
                      per * static_cast<double>(todo.size() - finished)));
      if (!healthy) {
        if (unhealthy.insert(device).second) {
          log(
              fmt::format("{} failed its health check after that candidate; no more work is "
                          "sent to it in this run",
                          device));
        }
        stop();
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (const auto& device : threads_on) threads.emplace_back(worker, device);
  for (auto& t : threads) t.join();
  builder.join();
  summary.evaluation_seconds = since(started);
  return summary;
}

}  // namespace kbv::eval

namespace kbv::eval {

std::vector<std::string> parse_devices(const std::string& spec) {
  std::vector<std::string> devices;
  if (spec == "all") {
    for (int i = 0; fs::exists("/dev/nvidia" + std::to_string(i)); ++i) {
      devices.push_back("cuda:" + std::to_string(i));
    }
    if (devices.empty()) devices.push_back("cpu");
    return devices;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    auto end = spec.find(',', start);
    auto item = spec.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!(item == "cpu" || item == "cuda" || (item.starts_with("cuda:") && item.size() > 5))) {
      throw UsageError("--devices takes all, cpu, or a list such as cuda:0,cuda:1; not '" + item +
                       "'");
    }
    devices.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return devices;
}

}  // namespace kbv::eval
