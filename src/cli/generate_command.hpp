// `kbv generate`: the command line of generate/generate.hpp (options, the key from the
// environment, the summary and exit status). Kept apart from main.cpp, which only registers it.
#pragma once

#include <CLI/CLI.hpp>

#include "generate/generate.hpp"

namespace kbv::cli {

struct GenerateOptions {
  generate::GenerateRequest request;
  double temperature = -1;  // < 0: unset, the provider's default
  double timeout_s = 600;
  double backoff_s = 1;
  std::string levels;
  bool quiet = false;
  CLI::App* command = nullptr;
};

void add_generate_command(CLI::App& app, GenerateOptions& options);

// Exit status: 0 when every planned sample has a final row (whatever its outcome), 1 when some
// requests failed (a rerun asks for them again), 2 for usage errors (a missing key included, or
// another kbv generate writing the same folder), 3 for a fault of kbv itself (a full disk).
int run_generate(GenerateOptions& options);

}  // namespace kbv::cli
