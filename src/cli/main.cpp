// kbv: the command line. `kbv eval` evaluates one candidate against one problem and prints a
// summary; exit status 0 whenever the evaluation completed, whatever the verdict; 2 for usage
// errors (bad arguments, a malformed problem, a missing file); 3 for a fault of kbv itself.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/result.hpp"
#include "eval/evaluator.hpp"
#include "eval/protocol.hpp"
#include "report/summary.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitInternal = 3;

std::string default_device() {
  // The first CUDA GPU when the driver shows one, else the CPU.
  std::error_code ec;
  return fs::exists("/dev/nvidia0", ec) || fs::exists("/dev/nvidiactl", ec) ? "cuda" : "cpu";
}

fs::path default_cache_dir() {
  if (const char* dir = std::getenv("KBV_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "kbv";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache/kbv";
  return fs::temp_directory_path() / "kbv-cache";
}

void write_json_atomically(const fs::path& path, const nlohmann::json& value) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp);
    out << value.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kbv — KernelBench-Verified: evaluation of generated GPU kernels that cannot be "
      "fooled"};
  app.require_subcommand(1);
  // A repeated option takes its last value, so wrappers can append overrides.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string(kbv::kVersion));

  kbv::eval::EvalRequest request;
  std::string json_path;
  bool quiet = false;
  int compile_timeout = 900, call_timeout = 120;
  std::string device;
  auto* eval = app.add_subcommand("eval", "evaluate one candidate against one problem");
  eval->add_option("--problem,-p", request.problem,
                   "KernelBench-format problem file (Model, "
                   "get_inputs, get_init_inputs)")
      ->required();
  eval->add_option("--candidate,-c", request.candidate, "candidate file defining ModelNew")
      ->required();
  eval->add_option("--device,-d", device,
                   "cpu, cuda or cuda:N (default: the first CUDA GPU if present, else cpu)");
  eval->add_option("--protocol", request.protocol, "verified (default), kbv-paper or standard")
      ->check(CLI::IsMember(kbv::eval::protocol_names()));
  eval->add_option("--json,-o", json_path, "write the full result (JSON) here");
  eval->add_option("--size", request.size,
                   "problem size for the bundled suite: small (default) or large")
      ->check(CLI::IsMember({"small", "large"}));
  eval->add_option("--draws", request.hidden_draws, "draws per hidden family (default 3)")
      ->check(CLI::Range(1, 100));
  eval->add_option("--samples", request.timing_samples,
                   "timed calls per variant (default 60 on CUDA, 15 on CPU)")
      ->check(CLI::Range(1, 100000));
  eval->add_option("--rounds", request.timing_rounds, "interleaved timing rounds")
      ->check(CLI::Range(1, 1000));
  eval->add_flag("--no-timing{false}", request.measure, "check correctness only");
  eval->add_option("--timeout", call_timeout, "seconds allowed per forward call (default 120)")
      ->check(CLI::Range(1, 86400));
  eval->add_option("--compile-timeout", compile_timeout,
                   "seconds allowed to build and import the candidate (default 900)")
      ->check(CLI::Range(1, 86400));
  eval->add_option("--cache-dir", request.cache_dir, "build cache (default ~/.cache/kbv)");
  eval->add_option("--work-dir", request.work_dir, "where run directories go (default: TMPDIR)");
  eval->add_flag("--keep-work-dir", request.keep_work_dir, "keep inputs, outputs and logs");
  eval->add_flag("--no-sandbox{false}", request.sandbox, "run the candidate without isolation");
  eval->add_flag("--quiet,-q", quiet, "print only the summary");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }

  request.device = device.empty() ? default_device() : device;
  request.compile_timeout = std::chrono::seconds(compile_timeout);
  request.call_timeout = std::chrono::seconds(call_timeout);
  if (request.cache_dir.empty()) request.cache_dir = default_cache_dir();
  if (!quiet) {
    request.progress = [](const std::string& line) { fmt::print(stderr, "[kbv] {}\n", line); };
  }
  if (!(request.device == "cpu" || request.device == "cuda" ||
        request.device.starts_with("cuda:"))) {
    fmt::print(stderr, "kbv: --device must be cpu, cuda or cuda:N, not '{}'\n", request.device);
    return kExitUsage;
  }

  try {
    kbv::Result result = kbv::eval::evaluate(request);
    if (!json_path.empty()) write_json_atomically(json_path, result.to_json());
    fmt::print("{}", kbv::report::summary(result));
    return 0;
  } catch (const kbv::eval::UsageError& error) {
    fmt::print(stderr, "kbv: {}\n", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    fmt::print(stderr, "kbv: internal error (a fault of kbv, please report it): {}\n",
               error.what());
    return kExitInternal;
  }
}
