#include "generate/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/hash.hpp"
#include "generate/code_block.hpp"
#include "generate/prompt.hpp"
#include "schedule/discovery.hpp"

namespace kbv::generate {
namespace fs = std::filesystem;
using nlohmann::json;

std::string kernel_file_name(const SampleKey& key) {
  return fmt::format("level_{}_problem_{}_sample_{}_kernel.py", key.level, key.problem_id,
                     key.sample);
}

std::string failed_sample_stub(const SampleKey& key, const std::string& outcome) {
  return fmt::format(
      "# kbv generate: no candidate for level {} problem {} sample {}.\n"
      "# The model's answer held no code to take (outcome {} in generations.jsonl), so this\n"
      "# sample fails: importing this file raises, which kbv run records as compile_error.\n"
      "raise RuntimeError(\n"
      "    \"kbv generate: the model's answer held no code block ({}); see generations.jsonl\"\n"
      ")\n",
      key.level, key.problem_id, key.sample, outcome, outcome);
}

std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t pos = text.find(secret); pos != std::string::npos;
       pos = text.find(secret, pos + 10)) {
    text.replace(pos, secret.size(), "[redacted]");
  }
  return text;
}

namespace {

void write_atomically(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string duration_text(double seconds) {
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

struct ProblemPrompt {
  schedule::Problem problem;
  std::string label;  // "level1/19_ReLU"
  std::string prompt, prompt_sha256, problem_sha256;
};

struct Job {
  const ProblemPrompt* problem;
  SampleKey key;
};

// What a finished answer becomes on disk: the code taken, or the stub; and the row's outcome.
struct Written {
  Extracted extracted;
  std::string outcome;
  bool stub = false;
  std::string content;
};

Written decide(const SampleKey& key, const std::string& answer, bool truncated) {
  Written w;
  w.extracted = extract_code(answer);
  w.outcome = to_string(w.extracted.outcome);
  // A stopped-at-the-limit answer is recorded as such whatever was extracted from it: its code,
  // if any, is likely cut and evaluated as it is.
  if (truncated) w.outcome = to_string(Extraction::Truncated);
  w.stub = w.extracted.code.empty();
  w.content = w.stub ? failed_sample_stub(key, w.outcome) : w.extracted.code;
  return w;
}

}  // namespace

GenerateSummary generate(const GenerateRequest& request) {
  GenerateSummary summary;
  if (!fs::exists(request.problems))
    throw std::runtime_error("no such problem folder: " + request.problems.string());
  std::vector<schedule::Problem> problems;
  for (auto& p : schedule::find_problems(request.problems)) {
    if (!p.level || !p.id) {
      summary.skipped.push_back(p.path.string() +
                                ": no level folder (levelN/) or no leading id (N_Name.py), so no "
                                "KernelBench file name");
      continue;
    }
    if (!request.levels.empty() &&
        std::find(request.levels.begin(), request.levels.end(), *p.level) == request.levels.end())
      continue;
    const auto label = fmt::format("level{}/{}", *p.level, p.name);
    if (!request.filters.empty() &&
        std::none_of(request.filters.begin(), request.filters.end(),
                     [&](const std::string& f) { return label.find(f) != std::string::npos; }))
      continue;
    // Two problems with one level and id would write the same file names.
    auto same = std::find_if(problems.begin(), problems.end(), [&](const schedule::Problem& q) {
      return q.level == p.level && q.id == p.id;
    });
    if (same != problems.end()) {
      summary.skipped.push_back(fmt::format(
          "{}: level {} id {} is also {}'s, and KernelBench's file names hold only those",
          p.path.string(), *p.level, *p.id, same->path.string()));
      continue;
    }
    problems.push_back(std::move(p));
  }
  if (problems.empty()) throw std::runtime_error("no problems under " + request.problems.string());

  fs::create_directories(request.out);
  Ledger ledger(request.out / "generations.jsonl");
  // One output folder, one model and prompt: mixing them would make the folder's results
  // unattributable (kbv run names the run after the folder).
  for (const auto& [key, row] : ledger.state().final_rows) {
    for (const char* field : {"model", "api", "prompt"}) {
      std::string mine = field == std::string("model") ? request.model
                         : field == std::string("api") ? request.api
                                                       : request.prompt;
      if (row.value(field, "") != mine) {
        throw std::runtime_error(
            fmt::format("{} holds generations with {} '{}', not '{}': use another --out folder",
                        request.out.string(), field, row.value(field, ""), mine));
      }
    }
  }

  std::vector<fs::path> paths;
  for (const auto& p : problems) paths.push_back(p.path);
  auto shown = shown_sources(paths, request.prompt == "input-blind");
  auto prompt_set = load_prompt_set(shown.prompts_dir, request.prompt, request.hardware);
  // Input-blind hides the example's input builders too, so the example teaches the same form.
  // (prompt_files_sha256 still names the file; the example shown follows from it and the kind.)
  if (!shown.example_model.empty()) prompt_set.example_model = shown.example_model;

  std::vector<ProblemPrompt> prompts;
  prompts.reserve(problems.size());
  for (const auto& p : problems) {
    auto it = shown.sources.find(p.path.string());
    if (it == shown.sources.end()) {
      auto error = shown.errors.find(p.path.string());
      summary.skipped.push_back(p.path.string() + ": " +
                                (error != shown.errors.end() ? error->second : "not read"));
      continue;
    }
    ProblemPrompt pp{p, fmt::format("level{}/{}", *p.level, p.name),
                     render_prompt(prompt_set, it->second), "", sha256_file(p.path)};
    pp.prompt_sha256 = sha256_hex(pp.prompt);
    prompts.push_back(std::move(pp));
  }
  summary.problems = static_cast<int>(prompts.size());
  summary.skipped_problems = static_cast<int>(summary.skipped.size());

  std::vector<Job> jobs;
  for (const auto& pp : prompts) {
    for (int s = 0; s < request.samples; ++s) {
      SampleKey key{*pp.problem.level, *pp.problem.id, s};
      ++summary.planned;
      if (!ledger.done(key)) {
        jobs.push_back({&pp, key});
        continue;
      }
      ++summary.already_done;
      // A final row whose file is gone (deleted, or a copy of the ledger alone): the row holds
      // the answer, so the file is written again without asking the model.
      auto file = request.out / kernel_file_name(key);
      if (!fs::exists(file)) {
        const auto& row = ledger.state().final_rows.at(key);
        auto w = decide(key, row.value("response", ""), row.value("outcome", "") == "truncated");
        write_atomically(file, w.content);
        ++summary.restored;
      }
    }
  }

  auto provider = make_provider(request.api, request.base_url);
  ModelParams params{request.model, request.temperature, request.max_tokens};
  RateLimiter limiter(request.rpm);
  std::atomic<bool> stop{false};
  std::mutex mutex;  // the summary and the progress line
  std::atomic<size_t> next{0};
  int in_flight = 0, finished = 0;
  const auto start = std::chrono::steady_clock::now();
  const int total = static_cast<int>(jobs.size());

  auto report_progress = [&](const std::string& event) {
    if (!request.progress) return;
    if (!event.empty()) request.progress(event);
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string eta = "ETA ?";
    if (finished > 0) eta = "ETA " + duration_text(elapsed / finished * (total - finished));
    if (finished == total) eta = "took " + duration_text(elapsed);
    request.progress(
        fmt::format("[{}/{}] {} ok, {} without code, {} failed, {} in flight, {}", finished, total,
                    summary.generated - summary.outcomes["no_code_block"],
                    summary.outcomes["no_code_block"], summary.failed, in_flight, eta));
  };

  // One sample: its request, its file and its row. Throws only for kbv's own failures.
  auto run_job = [&](const Job& job, const ExchangeContext& context) {
    auto http = provider->request(job.problem->prompt, params, request.key);
    Exchange ex = exchange(context, http);
    json row = {{"problem", job.problem->label},
                {"problem_file", job.problem->problem.path.string()},
                {"problem_sha256", job.problem->problem_sha256},
                {"level", job.key.level},
                {"problem_id", job.key.problem_id},
                {"sample", job.key.sample},
                {"api", request.api},
                {"model", request.model},
                {"temperature", request.temperature ? json(*request.temperature) : json()},
                {"max_tokens", request.max_tokens},
                {"prompt", request.prompt},
                {"hardware", request.hardware.empty() ? json() : json(request.hardware)},
                {"prompt_sha256", job.problem->prompt_sha256},
                {"prompt_files_sha256", prompt_set.file_sha256},
                {"attempts", ex.attempts},
                {"latency_s", ex.latency_s},
                {"finished_at", utc_now()}};
    if (!ex.retried.empty()) row["retries"] = ex.retried;
    std::string event;
    if (ex.answered) {
      auto w = decide(job.key, ex.completion.text, ex.completion.truncated);
      auto file = kernel_file_name(job.key);
      // The file before its row: a row always has its file (ledger.hpp).
      write_atomically(request.out / file, w.content);
      row["response"] = redact(ex.completion.text, request.key);
      row["usage"] = ex.completion.usage;
      row["finish_reason"] = ex.completion.finish_reason;
      row["outcome"] = w.outcome;
      row["code_blocks"] = w.extracted.blocks;
      row["block_taken"] = w.extracted.taken >= 0 ? json(w.extracted.taken) : json();
      row["kernel_file"] = file;
      row["stub"] = w.stub;
      row["code_sha256"] = sha256_hex(w.content);
      ledger.append(row);
      std::lock_guard lock(mutex);
      ++summary.generated;
      ++summary.outcomes[w.outcome];
      if (w.outcome != "ok") event = fmt::format("{}: {}", file, w.outcome);
    } else {
      row["outcome"] = "request_failed";
      row["error"] = redact(ex.error, request.key);
      row["http_status"] = ex.last_status;
      ledger.append(row);
      std::lock_guard lock(mutex);
      ++summary.failed;
      summary.failures.push_back(
          fmt::format("{}: {}", kernel_file_name(job.key), redact(ex.error, request.key)));
      event = summary.failures.back();
      if (ex.auth_failed && !stop.exchange(true)) {
        summary.stopped_on_auth = true;
        event += " (stopping: every request would be refused)";
      }
    }
    std::lock_guard lock(mutex);
    --in_flight;
    ++finished;
    report_progress(event);
  };

  auto worker = [&](unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    ExchangeContext context{*provider,
                            request.retry,
                            limiter,
                            http_post,
                            [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); },
                            [&] { return uniform(rng); },
                            &stop};
    for (;;) {
      size_t index = next.fetch_add(1);
      if (index >= jobs.size() || stop.load()) return;
      const Job& job = jobs[index];
      {
        std::lock_guard lock(mutex);
        ++in_flight;
      }
      try {
        run_job(job, context);
      } catch (const std::exception& error) {
        // kbv's own failure (a full disk, say): nothing more can be recorded, so the run stops;
        // what was recorded stays, and a rerun asks for the rest.
        std::lock_guard lock(mutex);
        --in_flight;
        if (summary.fatal.empty()) summary.fatal = redact(error.what(), request.key);
        stop = true;
        return;
      }
    }
  };

  if (request.progress) {
    request.progress(fmt::format("{} problems x {} samples: {} to generate, {} already in {}",
                                 summary.problems, request.samples, jobs.size(),
                                 summary.already_done, request.out.string()));
  }
  const int threads =
      std::max(1, std::min<int>(request.concurrency, static_cast<int>(jobs.size())));
  http_global_init();  // libcurl's global set-up is not thread-safe: before the threads
  std::vector<std::thread> pool;
  std::random_device entropy;
  for (int t = 0; t < threads && !jobs.empty(); ++t) pool.emplace_back(worker, entropy());
  for (auto& thread : pool) thread.join();
  return summary;
}

}  // namespace kbv::generate
