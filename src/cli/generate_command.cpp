#include "cli/generate_command.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "generate/prompt.hpp"
#include "generate/provider.hpp"

namespace kbv::cli {

void add_generate_command(CLI::App& app, GenerateOptions& options) {
  auto& r = options.request;
  auto* cmd = app.add_subcommand(
      "generate",
      "prompt a model for candidates to every problem (KernelBench's layout: "
      "OUT/level_L_problem_P_sample_S_kernel.py and OUT/generations.jsonl); resumable. The API "
      "key comes from KBV_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY), never from the "
      "command line; KBV_NO_API_KEY=1 sends none (a local server without auth)");
  options.command = cmd;
  cmd->add_option("--problems", r.problems, "problem tree (KernelBench layout: level1/19_ReLU.py)")
      ->required();
  cmd->add_option("--model", r.model, "the model's name as the API knows it")->required();
  cmd->add_option("--out,-o", r.out, "output folder (the run: kbv run --candidates OUT)")
      ->required();
  cmd->add_option("--api", r.api, "openai (chat completions, default) or anthropic (messages)")
      ->check(CLI::IsMember({"openai", "anthropic"}));
  cmd->add_option("--base-url", r.base_url,
                  "API base, e.g. http://localhost:8000/v1 (default: the provider's own)");
  cmd->add_option("--samples,-n", r.samples, "samples per problem (default 1)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--concurrency,-j", r.concurrency, "requests at once (default 4)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--temperature", options.temperature,
                  "sampling temperature (default: the provider's)")
      ->check(CLI::Range(0.0, 2.0));
  cmd->add_option("--max-tokens", r.max_tokens, "answer length limit in tokens (default 8192)")
      ->check(CLI::Range(1, 10000000));
  cmd->add_option("--prompt", r.prompt,
                  "one-shot (KernelBench's, default) or input-blind (get_inputs and the sizes it "
                  "uses left out of the problem shown)")
      ->check(CLI::IsMember(generate::prompt_kinds()));
  cmd->add_option("--hardware", r.hardware,
                  "add the notes of this GPU to the prompt (prompts/hardware/<H>.md, e.g. H200)");
  cmd->add_option("--rpm", r.rpm, "at most this many requests per minute (default: no cap)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--timeout", options.timeout_s, "seconds allowed per request (default 600)")
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--retries", r.retry.max_retries,
                  "retries of a request refused with 429 or 5xx or cut short (default 6)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--timeout-retries", r.retry.timeout_retries,
                  "retries of a request that ran past --timeout (default 2)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--backoff", options.backoff_s,
                  "seconds of the first retry's backoff, doubled per retry up to 60 (default 1); "
                  "a Retry-After from the server takes precedence when longer")
      ->check(CLI::Range(0.0, 600.0));
  cmd->add_option("--levels", options.levels, "only these levels, e.g. 1,2");
  cmd->add_option("--filter", r.filters,
                  "only problems whose levelL/name contains one of these, e.g. "
                  "level1/3_ReLU,Softmax")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--quiet,-q", options.quiet, "no progress lines");
}

namespace {

// The key, from the environment only: a command-line key would be in `ps`, shell history and
// every log that records argv.
std::optional<std::string> api_key(const std::string& api, std::string& error) {
  for (const auto& name : generate::key_variables(api)) {
    const char* value = std::getenv(name.c_str());
    if (!value || !*value) continue;
    // A key with a line break would end its header and start another: refused, not sent.
    for (const char* c = value; *c; ++c) {
      if (static_cast<unsigned char>(*c) < 0x20 || *c == 0x7f) {
        error = fmt::format("{} holds a control character (a line break?): not a key", name);
        return std::nullopt;
      }
    }
    return std::string(value);
  }
  if (const char* none = std::getenv("KBV_NO_API_KEY"); none && std::string(none) == "1") {
    return std::string();
  }
  auto names = generate::key_variables(api);
  error = fmt::format(
      "no API key: set {} (or {}); for a local server without authentication set "
      "KBV_NO_API_KEY=1",
      names[0], names[1]);
  return std::nullopt;
}

}  // namespace

int run_generate(GenerateOptions& options) {
  auto& r = options.request;
  std::string error;
  auto key = api_key(r.api, error);
  if (!key) {
    fmt::print(stderr, "kbv generate: {}\n", error);
    return 2;
  }
  r.key = *key;
  if (r.base_url.empty()) r.base_url = generate::default_base_url(r.api);
  if (options.temperature >= 0) r.temperature = options.temperature;
  r.retry.backoff.base =
      std::chrono::milliseconds(static_cast<long long>(options.backoff_s * 1000));
  r.retry.timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
  if (!options.levels.empty()) {
    std::stringstream list(options.levels);
    std::string item;
    while (std::getline(list, item, ',')) {
      try {
        r.levels.push_back(std::stoi(item));
      } catch (...) {
        fmt::print(stderr, "kbv generate: --levels takes numbers, e.g. 1,2 (not '{}')\n", item);
        return 2;
      }
    }
  }
  if (!options.quiet) {
    const bool tty = ::isatty(STDERR_FILENO);
    r.progress = [tty](const std::string& line) {
      // On a terminal the [done/total] counter rewrites one line; events get lines of their own.
      bool status = line.starts_with("[");
      if (tty) {
        fmt::print(stderr, "\r\033[K[kbv generate] {}{}", line, status ? "" : "\n");
      } else {
        fmt::print(stderr, "[kbv generate] {}\n", line);
      }
    };
  }
  generate::GenerateSummary s;
  try {
    s = generate::generate(r);
  } catch (const std::runtime_error& e) {
    fmt::print(stderr, "kbv generate: {}\n", generate::redact(e.what(), r.key));
    return 2;
  }
  if (!options.quiet && ::isatty(STDERR_FILENO)) fmt::print(stderr, "\n");
  if (!s.fatal.empty()) {
    fmt::print(stderr,
               "kbv generate: stopped by a fault of kbv (what was recorded stays; rerun to go "
               "on): {}\n",
               s.fatal);
    return 3;
  }
  for (const auto& skipped : s.skipped) fmt::print("skipped problem {}\n", skipped);
  fmt::print("{} samples ({} problems x {}): {} generated now, {} already there{}, {} failed\n",
             s.planned, s.problems, r.samples, s.generated, s.already_done,
             s.restored ? fmt::format(" ({} files written again from their rows)", s.restored) : "",
             s.failed);
  for (const auto& [outcome, n] : s.outcomes) fmt::print("  {:<24} {}\n", outcome, n);
  const int missing = s.planned - s.already_done - s.generated;
  if (missing > 0) {
    fmt::print("{} sample{} without a candidate (rerun the same command to ask again){}\n", missing,
               missing == 1 ? "" : "s",
               s.stopped_on_auth ? "; the run stopped: the API refused the key" : "");
    for (const auto& f : s.failures) fmt::print("  {}\n", f);
    return 1;
  }
  fmt::print("candidates and generations.jsonl in {}\n", r.out.string());
  return 0;
}

}  // namespace kbv::cli
