// kbv: the command line.
//   kbv eval    one candidate against one problem; prints a summary, --json writes the result
//   kbv run     every candidate of a suite, results streamed into a SQLite database, resumable;
//               --shard I/N runs one machine's part of it, --ray ADDRESS spreads it over a Ray
//               cluster
//   kbv merge   run databases (shards) into one, idempotently
//   kbv export  a run database as JSON Lines or KernelBench's eval_results.json files
//   kbv audit   every problem's reference as its own candidate: the suite-quality table
//   kbv generate  candidates from a model (OpenAI or Anthropic API) in KernelBench's layout
//   kbv serve   an HTTP reward service for RL loops (docs/serve.md)
// Exit status: 0 whenever the work completed, whatever the verdicts; 2 for usage errors (bad
// arguments, a malformed problem, a missing file); 3 for a fault of kbv itself (kbv eval: also a
// harness_error outcome, whose JSON is written; kbv run stores those, prints them and exits 0).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "cli/generate_command.hpp"
#include "core/flags.hpp"
#include "core/result.hpp"
#include "eval/evaluator.hpp"
#include "eval/protocol.hpp"
#include "eval/workspace.hpp"
#include "orchestrate/worker_protocol.hpp"
#include "report/audit_table.hpp"
#include "report/eval_summary.hpp"
#include "report/export.hpp"
#include "report/run_comparison.hpp"
#include "schedule/audit.hpp"
#include "schedule/devices.hpp"
#include "schedule/ray_run.hpp"
#include "schedule/suite.hpp"
#include "serve/server.hpp"
#include "store/merge.hpp"
#include "store/store.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitInternal = 3;

fs::path default_cache_dir() {
  if (const char* dir = std::getenv("KBV_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "kbv";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache/kbv";
  return fs::temp_directory_path() / "kbv-cache";
}

void write_atomically(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

// Options shared by `eval` and `run`: how each candidate is evaluated.
struct EvalOptions {
  kbv::eval::EvalRequest request;
  std::string device;
  int compile_timeout = 900, call_timeout = 120;
  bool quiet = false;

  void add_to(CLI::App* cmd) {
    cmd->add_option("--device,-d", device,
                    "cpu, cuda or cuda:N (default: the first CUDA GPU if present, else cpu)");
    cmd->add_option("--protocol", request.settings.protocol,
                    "verified (default), kbv-paper or standard")
        ->check(CLI::IsMember(kbv::eval::protocol_names()));
    cmd->add_option("--size", request.settings.size,
                    "problem size for the bundled suite: small (default) or large")
        ->check(CLI::IsMember({"small", "large"}));
    cmd->add_option("--draws", request.settings.hidden_draws, "draws per hidden family (default 3)")
        ->check(CLI::Range(1, 100));
    cmd->add_option("--profile", request.settings.timing_profile,
                    "timing profile: quick, standard (default) or precise; rounds go on until "
                    "the speedup's interval is within the profile's target or its budget ends")
        ->check(CLI::IsMember({"quick", "standard", "precise"}));
    cmd->add_option("--samples", request.settings.timing_samples,
                    "fixed timed calls per variant instead of the profile's adaptive count "
                    "(60 on CUDA, 15 on CPU when only --rounds is given)")
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--rounds", request.settings.timing_rounds,
                    "fixed interleaved timing rounds instead of the profile's adaptive count")
        ->check(CLI::Range(1, 1000));
    cmd->add_flag("--no-timing{false}", request.settings.measure, "check correctness only");
    cmd->add_option("--timeout", call_timeout, "seconds allowed per forward call (default 120)")
        ->check(CLI::Range(1, 86400));
    cmd->add_option("--compile-timeout", compile_timeout,
                    "seconds allowed to build and import a candidate (default 900)")
        ->check(CLI::Range(1, 86400));
    cmd->add_option("--cache-dir", request.placement.cache_dir,
                    "build cache (default ~/.cache/kbv)");
    cmd->add_option("--work-dir", request.placement.work_dir,
                    "where run directories go (default: TMPDIR)");
    cmd->add_flag("--keep-work-dir", request.placement.keep_work_dir,
                  "keep inputs, outputs and logs");
    cmd->add_flag("--no-sandbox{false}", request.settings.sandbox,
                  "run candidates without isolation");
    cmd->add_flag("--allow-library", request.settings.allow_library,
                  "accept PyTorch rewrites: a forward that runs none of the candidate's own code "
                  "(no_custom_kernel), PyTorch doing the main operator (library_main_op) and "
                  "kernels never called are warnings, not rejects, under the verified protocol "
                  "(the published protocols always warn)");
    cmd->add_flag("--quiet,-q", quiet, "no progress lines");
  }

  // Fills in defaults; returns an error message for invalid combinations.
  std::string finish() {
    request.settings.device = device.empty() ? kbv::schedule::default_device() : device;
    request.limits.compile_timeout = std::chrono::seconds(compile_timeout);
    request.limits.call_timeout = std::chrono::seconds(call_timeout);
    if (request.placement.cache_dir.empty()) request.placement.cache_dir = default_cache_dir();
    if (!quiet) {
      request.placement.progress = [](const std::string& line) {
        fmt::print(stderr, "[kbv] {}\n", line);
      };
    }
    if (!(request.settings.device == "cpu" || request.settings.device == "cuda" ||
          request.settings.device.starts_with("cuda:"))) {
      return fmt::format("--device must be cpu, cuda or cuda:N, not '{}'", request.settings.device);
    }
    // Byte limits from the environment (0 turns one off): the scratch quota, and the candidate's
    // heap cap on the CPU device (RLIMIT_DATA; default 16 GiB), for machines of less memory.
    // KBV_REFERENCE_ADDRESS_SPACE_BYTES caps the reference worker's address space (a test and
    // operations knob: running out of it is a harness fault, out_of_memory).
    for (auto [name, limit] :
         {std::pair{"KBV_SCRATCH_QUOTA_BYTES", &request.limits.max_scratch_bytes},
          std::pair{"KBV_HOST_MEMORY_BYTES", &request.limits.max_host_memory_bytes},
          std::pair{"KBV_REFERENCE_ADDRESS_SPACE_BYTES",
                    &request.limits.reference_address_space_bytes}}) {
      const char* value = std::getenv(name);
      if (!value || !*value) continue;
      char* end = nullptr;
      errno = 0;
      *limit = std::strtoull(value, &end, 10);
      if (errno != 0 || *end != '\0' || *value == '-') {
        return fmt::format("{} must be a number of bytes, not '{}'", name, value);
      }
    }
    return "";
  }
};

// The work folders a killed kbv left behind are removed before any new work: a full disk must
// not fail every problem of the next run.
void reclaim_leftovers(const kbv::eval::EvalRequest& request) {
  auto reclaimed = kbv::eval::reclaim_abandoned_folders(request.placement.work_dir);
  if (reclaimed.folders > 0) {
    fmt::print(stderr,
               "[kbv] reclaimed {} work folder{} ({:.1f} MB) left by a kbv that was killed\n",
               reclaimed.folders, reclaimed.folders == 1 ? "" : "s",
               static_cast<double>(reclaimed.bytes) / 1e6);
  }
}

int run_eval(EvalOptions& options, const std::string& json_path) {
  reclaim_leftovers(options.request);
  kbv::Result result = kbv::eval::evaluate(options.request);
  if (!json_path.empty())
    write_atomically(
        json_path,
        result.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  fmt::print("{}", kbv::report::summary(result));
  // A fault of kbv itself is no verdict: the exit status says so (the JSON is written anyway).
  return result.verdict == kbv::Verdict::HarnessError ? kExitInternal : 0;
}

void print_summary(const kbv::schedule::SuiteSummary& summary,
                   const kbv::schedule::SuiteRequest& suite);

int run_suite(kbv::schedule::SuiteRequest& suite) {
  reclaim_leftovers(suite.settings);
  auto summary = kbv::schedule::run_suite(suite);
  print_summary(summary, suite);
  return 0;
}

void print_summary(const kbv::schedule::SuiteSummary& summary,
                   const kbv::schedule::SuiteRequest& suite) {
  if (!suite.shard.whole()) {
    fmt::print("shard {}/{}: {} of the suite's {} tasks ({} problems)\n", suite.shard.index,
               suite.shard.count, summary.tasks, summary.suite_tasks, summary.shard_problems);
  }
  fmt::print("{} tasks: {} evaluated now, {} already stored, {} files skipped\n", summary.tasks,
             summary.evaluated, summary.already_done, summary.unmatched.size());
  if (summary.evaluated_again > 0) {
    fmt::print("  ({} stored timeout{} evaluated again under the longer timeout)\n",
               summary.evaluated_again, summary.evaluated_again == 1 ? "" : "s");
  }
  if (summary.harness_errors_again > 0) {
    fmt::print("  ({} stored harness error{} evaluated again)\n", summary.harness_errors_again,
               summary.harness_errors_again == 1 ? "" : "s");
  }
  for (const auto& [verdict, n] : summary.verdicts) fmt::print("  {:<14} {}\n", verdict, n);
  for (const auto& broken : summary.broken_problems) {
    fmt::print("problem {} could not be evaluated (its candidates were skipped): {}\n",
               broken.path.string(), broken.reason);
  }
  if (summary.not_evaluated > 0) {
    const bool one = summary.not_evaluated == 1;
    fmt::print("{} task{} not evaluated (no device left to take {}); a rerun evaluates {}\n",
               summary.not_evaluated, one ? "" : "s", one ? "it" : "them", one ? "it" : "them");
  }
  if (!summary.harness_errors.empty()) {
    const auto n = summary.harness_errors.size();
    fmt::print(
        "{} harness error{} (faults of kbv itself, not verdicts: left out of every figure of kbv "
        "report; a rerun evaluates {} again):\n",
        n, n == 1 ? "" : "s", n == 1 ? "it" : "them");
    for (const auto& e : summary.harness_errors) {
      fmt::print("  {} [{}{}]: {}\n", e.path.string(), e.kind, e.stored ? "" : ", not stored",
                 e.reason);
    }
  }
  if (summary.ray_nodes > 0) {
    // Builds ran on the nodes, beside their evaluations: their time is in the split below.
    fmt::print("evaluation {:.1f} s on {} Ray node{}; results in {}\n", summary.evaluation_seconds,
               summary.ray_nodes, summary.ray_nodes == 1 ? "" : "s", suite.database.string());
  } else {
    fmt::print("build {:.1f} s, evaluation {:.1f} s; results in {}\n", summary.build_seconds,
               summary.evaluation_seconds, suite.database.string());
  }
  if (summary.evaluated > 0 && summary.ray_nodes > 0) {
    auto part = [&](const char* name) { return summary.split.value(name, 0.0); };
    fmt::print(
        "time split (summed over results): compile {:.1f} s, reference {:.1f} s, candidate "
        "{:.1f} s, idle {:.1f} s\n",
        part("compile"), part("reference"), part("candidate"), part("idle"));
  } else if (summary.evaluated > 0) {
    auto part = [&](const char* name) { return summary.split.value(name, 0.0); };
    fmt::print(
        "time split (summed over results): compile {:.1f} s, reference {:.1f} s, candidate "
        "{:.1f} s, idle {:.1f} s; {} reference session{} for {} results\n",
        part("compile"), part("reference"), part("candidate"), part("idle"),
        summary.reference_sessions, summary.reference_sessions == 1 ? "" : "s", summary.evaluated);
  }
  if (summary.postponed > 0) {
    fmt::print("{} task{} needing the device's memory to itself put back behind the others\n",
               summary.postponed, summary.postponed == 1 ? "" : "s");
  }
}

// The `kbv run` options a node's run gets under --ray: the ones given here, less those the Ray
// driver sets per task (the trees, the database, the device, the shard) and the progress switch
// (a node's run is quiet; its rows are reported here). Taken from the command line as typed, so
// every evaluation setting reaches the nodes without a list of them to keep in step.
std::vector<std::string> node_arguments(int argc, char** argv) {
  static const std::set<std::string> with_value = {
      "--problems", "--candidates", "--db", "--ray", "--shard", "--devices", "--device", "-d"};
  static const std::set<std::string> flags = {"--quiet", "-q"};
  std::vector<std::string> kept;
  int i = 1;
  while (i < argc && std::string(argv[i]) != "run") ++i;
  for (++i; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg.substr(0, arg.find('='));
    if (with_value.count(name)) {
      if (name == arg) ++i;  // "--db x": its value is the next word
      continue;
    }
    if (!flags.count(arg)) kept.push_back(arg);
  }
  return kept;
}

// The `kbv run` options each node's run gets under `kbv serve --ray`: the server-wide ones that
// mean the same there, as typed (so paths are the nodes'); --build-jobs is kbv run's --jobs. A
// job's own settings (protocol, draws, timing, timeouts) come with each batch it is sent in.
std::vector<std::string> serve_node_arguments(int argc, char** argv) {
  static const std::map<std::string, std::string> with_value = {
      {"--cache-dir", "--cache-dir"},
      {"--work-dir", "--work-dir"},
      {"--workers-per-device", "--workers-per-device"},
      {"--build-jobs", "--jobs"}};
  std::vector<std::string> kept;
  int i = 1;
  while (i < argc && std::string(argv[i]) != "serve") ++i;
  for (++i; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--keep-work-dir") {
      kept.push_back(arg);
      continue;
    }
    const auto equals = arg.find('=');
    const auto option = with_value.find(arg.substr(0, equals));
    if (option == with_value.end()) continue;
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    if (option->second == "--jobs" && value == "0") continue;  // no builds ahead: kbv run's 1+
    kept.insert(kept.end(), {option->second, value});
  }
  return kept;
}

int run_merge(const std::vector<std::string>& inputs, const std::string& output) {
  const auto summary =
      kbv::store::merge_databases(std::vector<fs::path>(inputs.begin(), inputs.end()), output);
  for (const auto& c : summary.conflicts) {
    fmt::print(stderr,
               "kbv merge: conflict on {} {}{} (key {}): kept the result of {}, dropped {}'s: "
               "{}\n",
               c.run, c.problem, c.sample ? fmt::format(" sample {}", *c.sample) : "",
               c.key.substr(0, 12), c.kept_from.string(), c.dropped_from.string(), c.why);
  }
  for (const auto& clash : summary.meta_clashes) {
    fmt::print(stderr, "kbv merge: meta {}\n", clash);
  }
  fmt::print("{} rows from {} database{} ({} read, {} duplicates, {} conflicts) into {}{}\n",
             summary.rows, inputs.size(), inputs.size() == 1 ? "" : "s", summary.read,
             summary.duplicates, summary.conflicts.size(), output,
             summary.device_alone > 0
                 ? fmt::format("; {} record{} of problems needing a device to themselves",
                               summary.device_alone, summary.device_alone == 1 ? "" : "s")
                 : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kbv — KernelBench-Verified: evaluation of generated GPU kernels that cannot be "
      "fooled"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(kbv::kVersion));
  // A repeated option takes its last value, so wrappers can append overrides.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  EvalOptions eval_options;
  std::string json_path;
  auto* eval = app.add_subcommand("eval", "evaluate one candidate against one problem");
  eval->add_option("--problem,-p", eval_options.request.problem,
                   "KernelBench-format problem file (Model, get_inputs, get_init_inputs)")
      ->required();
  eval->add_option("--candidate,-c", eval_options.request.candidate,
                   "candidate file defining ModelNew")
      ->required();
  eval->add_option("--json,-o", json_path, "write the full result (JSON) here");
  eval_options.add_to(eval);

  EvalOptions run_options;
  kbv::schedule::SuiteRequest suite;
  auto* run = app.add_subcommand("run", "evaluate every candidate of a suite into a database");
  run->add_option("--problems", suite.problems,
                  "problem tree (KernelBench layout: level1/19_ReLU.py)")
      ->required();
  run->add_option("--candidates", suite.candidates,
                  "candidate tree: <run>/level_<L>_problem_<P>_sample_<S>_kernel.py or files "
                  "named like their problem")
      ->required();
  run->add_option("--db", suite.database, "SQLite database (default results.sqlite)");
  std::string devices;
  run->add_option("--devices", devices,
                  "all, cpu, or cuda:0,cuda:1,...: one measurement worker per device "
                  "(default: --device)");
  run->add_option("--jobs,-j", suite.build_jobs, "candidates built at once (default: CPU count)")
      ->check(CLI::Range(1, 512));
  run->add_option("--workers-per-device", suite.workers_per_device,
                  "evaluations at once on each device (default: 1 on the CPU; on a GPU, the CPU "
                  "cores / (2 x GPUs), between 2 and 4); everything but timing overlaps, and one "
                  "timing at a time runs per device")
      ->check(CLI::Range(1, 64));
  std::string shard;
  run->add_option("--shard", shard,
                  "I/N: evaluate only this machine's part I of N (0 <= I < N), split by problem "
                  "the same way on every machine; merge the databases with kbv merge");
  std::string ray_address;
  run->add_option(
      "--ray", ray_address,
      "ADDRESS: evaluate on the Ray cluster there (host:port of its head, or auto): one "
      "Ray task per problem, each a kbv run on a node with its own build cache, every "
      "result stored here as it arrives; the device defaults to cuda (one GPU per "
      "task); see docs/distributed.md");
  run_options.add_to(run);

  std::vector<std::string> merge_inputs;
  std::string merge_output;
  auto* merger = app.add_subcommand(
      "merge",
      "run databases (e.g. the shards of kbv run --shard) into one; rows are keyed by content, "
      "so overlapping inputs add nothing twice");
  merger->add_option("databases", merge_inputs, "the run databases to merge")
      ->required()
      ->expected(1, -1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  merger->add_option("--out,-o", merge_output, "the merged database (written anew; not an input)")
      ->required();

  EvalOptions audit_options;
  kbv::schedule::SuiteRequest audit_suite;
  std::string audit_out, audit_format = "md", audit_devices;
  auto* auditor = app.add_subcommand(
      "audit",
      "every problem's reference evaluated as its own candidate through the verified pipeline: "
      "does the suite fit, is any problem degenerate or unstable against float64, how much does "
      "TF32 buy, how noisy is its timing (a table per problem)");
  auditor
      ->add_option("--problems", audit_suite.problems,
                   "problem tree (KernelBench layout: level1/19_ReLU.py)")
      ->required();
  auditor->add_option("--db", audit_suite.database, "SQLite database (default audit.sqlite)");
  auditor->add_option("--out,-o", audit_out, "write the table here (default: standard output)");
  auditor->add_option("--format", audit_format, "md (default), csv or json")
      ->check(CLI::IsMember({"md", "csv", "json"}));
  bool audit_table_only = false;
  auditor->add_flag("--table-only", audit_table_only,
                    "render the table from --db without evaluating anything (e.g. after a run "
                    "that was stopped)");
  auditor->add_option("--devices", audit_devices, "all, cpu, or cuda:0,cuda:1,...");
  std::string audit_shard;
  auditor->add_option("--shard", audit_shard,
                      "I/N: audit only this machine's part I of N (0 <= I < N), split by problem "
                      "as kbv run --shard splits it; merge the databases with kbv merge");
  auditor
      ->add_option("--workers-per-device", audit_suite.workers_per_device,
                   "evaluations at once on each device (as kbv run)")
      ->check(CLI::Range(1, 64));
  audit_options.add_to(auditor);

  EvalOptions serve_options;
  kbv::serve::ServeOptions serve;
  std::string serve_devices;
  auto* server = app.add_subcommand(
      "serve",
      "an HTTP reward service for RL loops: POST /v1/evaluations with a problem and a candidate, "
      "get the result and its reward components (docs/serve.md); SIGTERM drains");
  server->add_option("--host", serve.host, "address to listen on (default 127.0.0.1: loopback)");
  server->add_option("--port", serve.port, "port (default 8000; 0: any free port, printed)")
      ->check(CLI::Range(0, 65535));
  server
      ->add_option("--token-file", serve.token_file,
                   "file holding the bearer token every request must carry (required)")
      ->required();
  server->add_option("--db", serve.database,
                     "SQLite results database, shared with kbv run (default results.sqlite); "
                     "the queue and the sources go to <db>.serve/");
  server->add_option("--devices", serve_devices,
                     "all, cpu, or cuda:0,cuda:1,... (default: --device)");
  std::string serve_ray;
  server->add_option(
      "--ray", serve_ray,
      "ADDRESS: evaluate the queue on the Ray cluster there (host:port of its head, or auto): "
      "batches of one problem's jobs as Ray tasks, each a kbv run on a node with its own build "
      "cache, every result stored here; the device defaults to cuda (one GPU per task); see "
      "docs/serve.md");
  server
      ->add_option("--workers-per-device", serve.workers_per_device,
                   "evaluations at once on each device (default 1); one timing at a time runs "
                   "per device")
      ->check(CLI::Range(1, 64));
  // As kbv run's --jobs: the builds run at a low priority (orchestrate's kBuildNice), so they
  // fill idle cores without slowing the evaluations (a cold batch measured 277 s with half the
  // CPUs against kbv run's 179 s, docs/results/serve-cpu-2026-12-04.md).
  serve.build_jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  server
      ->add_option("--build-jobs", serve.build_jobs,
                   "candidates built at once ahead of evaluation, into the build cache "
                   "(default: CPU count, as kbv run; 0: each builds in its evaluation)")
      ->check(CLI::Range(0, 512));
  server
      ->add_option("--max-queue", serve.max_queue,
                   "queued evaluations at most; more get 429 with Retry-After (default 1024)")
      ->check(CLI::Range(1, 1000000));
  server
      ->add_option("--max-body-bytes", serve.max_body_bytes,
                   "largest request body; larger gets 413 (default 16 MiB)")
      ->check(CLI::Range(1024, 1 << 30));
  server
      ->add_option("--max-batch", serve.service.max_batch,
                   "requests per POST /v1/batches at most (default 1024)")
      ->check(CLI::Range(1, 100000));
  int max_wait_s = 3600;
  server
      ->add_option("--max-wait", max_wait_s,
                   "seconds a ?wait=1 request waits before it is answered 202 (default 3600)")
      ->check(CLI::Range(1, 86400));
  server
      ->add_option("--http-threads", serve.http_threads, "connections served at once (default 64)")
      ->check(CLI::Range(4, 4096));
  serve_options.add_to(server);

  std::string export_db, export_format = "jsonl", export_out;
  auto* exporter = app.add_subcommand("export",
                                      "write a run database as JSON Lines or "
                                      "KernelBench eval_results.json files");
  exporter->add_option("database", export_db, "the run database")->required();
  exporter->add_option("--format", export_format, "jsonl (default) or kernelbench")
      ->check(CLI::IsMember({"jsonl", "kernelbench"}));
  exporter->add_option("--out,-o", export_out,
                       "jsonl: a file (default stdout); kernelbench: a folder (required)");

  std::string report_db, report_format = "md", report_out, report_by = "run";
  kbv::report::Options report_options;
  auto* reporter = app.add_subcommand("report",
                                      "the figures researchers publish, from a run "
                                      "database: md, json, csv or a self-contained html");
  reporter->add_option("database", report_db, "the run database")->required();
  // The worker protocol as kbv declares it (orchestrate/worker_protocol.hpp), for the contract
  // test against the Python handlers and for docs; not a user command.
  auto* protocol_cmd =
      app.add_subcommand("worker-protocol", "print the declared worker protocol as JSON");
  protocol_cmd->group("");
  auto* flags_cmd = app.add_subcommand("flag-catalogue", "print the flag catalogue as JSON");
  flags_cmd->group("");
  std::string compare_a, compare_b;
  auto* comparer = app.add_subcommand("compare", "two run databases side by side");
  comparer->add_option("a", compare_a, "first run database")->required();
  comparer->add_option("b", compare_b, "second run database")->required();
  for (auto* cmd : {reporter, comparer}) {
    cmd->add_option("--format", report_format, "md (default), json, csv or html");
    cmd->add_option("--out,-o", report_out, "write here instead of standard output");
    cmd->add_option("--by", report_by, "group tables by run (default), model or level");
    cmd->add_flag("--include-flagged", report_options.include_flagged,
                  "put problems flagged degenerate or with a reference failing its float64 run "
                  "back into the figures (by default they are left out and listed apart)");
  }

  kbv::cli::GenerateOptions generate_options;
  kbv::cli::add_generate_command(app, generate_options);

  suite.database = "results.sqlite";
  audit_suite.database = "audit.sqlite";
  audit_suite.build_jobs = 1;  // nothing to build: the candidates are the references
  suite.build_jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }

  try {
    if (protocol_cmd->parsed()) {
      fmt::print("{}\n", kbv::orchestrate::worker_protocol_json().dump(2));
      return 0;
    }
    if (flags_cmd->parsed()) {
      nlohmann::json flags = nlohmann::json::array();
      for (const auto& f : kbv::flag_catalogue()) {
        nlohmann::json severities = {kbv::to_string(f.severity)};
        if (f.also) severities.push_back(kbv::to_string(*f.also));
        flags.push_back({{"id", f.id}, {"severities", severities}, {"meaning", f.meaning}});
      }
      fmt::print("{}\n", flags.dump(2));
      return 0;
    }
    if (eval->parsed()) {
      if (auto error = eval_options.finish(); !error.empty()) {
        fmt::print(stderr, "kbv: {}\n", error);
        return kExitUsage;
      }
      return run_eval(eval_options, json_path);
    }
    if (run->parsed()) {
      if (!ray_address.empty()) {
        if (!shard.empty() || !devices.empty()) {
          fmt::print(stderr,
                     "kbv: --ray splits the suite itself (one task per problem, one device per "
                     "task): it takes neither --shard nor --devices\n");
          return kExitUsage;
        }
        // The cluster's devices, not this machine's: a driver on a head node without a GPU
        // still sends its work to the GPUs of the nodes.
        if (run_options.device.empty()) run_options.device = "cuda";
      }
      if (auto error = run_options.finish(); !error.empty()) {
        fmt::print(stderr, "kbv: {}\n", error);
        return kExitUsage;
      }
      suite.settings = run_options.request;
      if (!devices.empty()) suite.devices = kbv::schedule::parse_devices(devices);
      if (!shard.empty()) suite.shard = kbv::schedule::parse_shard(shard);
      if (!run_options.quiet && ::isatty(STDERR_FILENO)) {
        // On a terminal the running counters (built n/N, [done/total] verdicts, ETA) rewrite one
        // status line; everything else still gets a line of its own.
        suite.settings.placement.progress = [](const std::string& line) {
          bool status = line.starts_with("[") || line.starts_with("built ");
          fmt::print(stderr, "\r\033[K[kbv] {}{}", line, status ? "" : "\n");
        };
      }
      if (!ray_address.empty()) {
        auto summary = kbv::schedule::run_on_ray(suite, {ray_address, node_arguments(argc, argv)});
        print_summary(summary, suite);
        return 0;
      }
      return run_suite(suite);
    }
    if (generate_options.command->parsed()) return kbv::cli::run_generate(generate_options);
    if (merger->parsed()) return run_merge(merge_inputs, merge_output);
    if (server->parsed()) {
      if (!serve_ray.empty()) {
        if (!serve_devices.empty()) {
          fmt::print(stderr,
                     "kbv: --ray evaluates on the cluster's devices (one per task): it takes "
                     "no --devices\n");
          return kExitUsage;
        }
        // The cluster's devices, as for kbv run --ray: a service on a machine without a GPU
        // still sends its work to the GPUs of the nodes.
        if (serve_options.device.empty()) serve_options.device = "cuda";
        serve.evaluators = "ray";
        serve.ray.address = serve_ray;
        serve.ray.node_arguments = serve_node_arguments(argc, argv);
      }
      if (auto error = serve_options.finish(); !error.empty()) {
        fmt::print(stderr, "kbv: {}\n", error);
        return kExitUsage;
      }
      serve.server = serve_options.request;
      if (!serve_devices.empty()) serve.devices = kbv::schedule::parse_devices(serve_devices);
      serve.service.max_wait = std::chrono::seconds(max_wait_s);
      serve.service.max_waiting = std::max(1, serve.http_threads / 2);
      reclaim_leftovers(serve.server);
      return kbv::serve::serve(serve);
    }
    if (auditor->parsed()) {
      if (auto error = audit_options.finish(); !error.empty()) {
        fmt::print(stderr, "kbv: {}\n", error);
        return kExitUsage;
      }
      audit_suite.settings = audit_options.request;
      if (!audit_devices.empty()) audit_suite.devices = kbv::schedule::parse_devices(audit_devices);
      if (!audit_shard.empty()) audit_suite.shard = kbv::schedule::parse_shard(audit_shard);
      kbv::schedule::SuiteSummary summary;
      if (!audit_table_only) {
        reclaim_leftovers(audit_suite.settings);
        summary = kbv::schedule::run_audit(audit_suite);
        print_summary(summary, audit_suite);
      } else if (!fs::exists(audit_suite.database)) {
        fmt::print(stderr, "kbv: database {} does not exist\n", audit_suite.database.string());
        return kExitUsage;
      }
      auto rows = kbv::report::audit_rows(kbv::store::Store(audit_suite.database).results());
      // A problem whose reference cannot be loaded or drawn is a finding of the audit too.
      for (const auto& broken : summary.broken_problems) {
        kbv::report::AuditRow row;
        row.problem =
            broken.path.parent_path().filename().string() + "/" + broken.path.stem().string();
        row.verdict = "broken";
        row.reason = broken.reason;
        rows.push_back(row);
      }
      auto text = kbv::report::render_audit(rows, *kbv::report::parse_format(audit_format));
      if (audit_out.empty()) {
        fmt::print("{}", text);
      } else {
        write_atomically(audit_out, text);
      }
      return 0;
    }
    if (reporter->parsed() || comparer->parsed()) {
      auto format = kbv::report::parse_format(report_format);
      auto by = kbv::report::parse_group_by(report_by);
      if (!format || !by) {
        fmt::print(stderr, "kbv: --format takes md, json, csv or html; --by run, model or level\n");
        return kExitUsage;
      }
      std::string text;
      if (reporter->parsed()) {
        if (!fs::exists(report_db)) {
          fmt::print(stderr, "kbv: database {} does not exist\n", report_db);
          return kExitUsage;
        }
        text = kbv::report::render(
            kbv::report::build_report(kbv::store::Store(report_db).results(), report_options),
            *format, *by);
      } else {
        for (const auto& db : {compare_a, compare_b}) {
          if (!fs::exists(db)) {
            fmt::print(stderr, "kbv: database {} does not exist\n", db);
            return kExitUsage;
          }
        }
        auto comparison = kbv::report::compare(kbv::store::Store(compare_a).results(),
                                               kbv::store::Store(compare_b).results(),
                                               report_options, fs::path(compare_a).stem().string(),
                                               fs::path(compare_b).stem().string());
        text = kbv::report::render(comparison, *format, *by);
      }
      if (report_out.empty()) {
        fmt::print("{}", text);
      } else {
        write_atomically(report_out, text);
      }
      return 0;
    }
    if (!fs::exists(export_db)) {
      fmt::print(stderr, "kbv: database {} does not exist\n", export_db);
      return kExitUsage;
    }
    kbv::store::Store db(export_db);
    if (export_format == "jsonl") {
      auto text = kbv::report::json_lines(db.results());
      if (export_out.empty()) {
        fmt::print("{}", text);
      } else {
        write_atomically(export_out, text);
      }
    } else {
      if (export_out.empty()) {
        fmt::print(stderr, "kbv: --format kernelbench needs --out FOLDER\n");
        return kExitUsage;
      }
      for (const auto& [file, content] : kbv::report::kernelbench_files(db.results())) {
        write_atomically(fs::path(export_out) / file, content.dump(2) + "\n");
      }
    }
    return 0;
  } catch (const kbv::store::MergeError& error) {
    fmt::print(stderr, "kbv merge: {}\n", error.what());
    return kExitUsage;
  } catch (const kbv::eval::UsageError& error) {
    fmt::print(stderr, "kbv: {}\n", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    fmt::print(stderr, "kbv: internal error (a fault of kbv, please report it): {}\n",
               error.what());
    return kExitInternal;
  }
}
