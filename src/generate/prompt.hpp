// Prompts: a template file (python/kbv/prompts/<kind>.md) with {{placeholders}} filled from the
// example pair, the optional hardware notes and the problem's source as shown (whole, or
// input-blind: python/kbv/prompt_source.py). The files are installed with the Python package and
// found the way the worker's package is (orchestrate/worker_process.hpp: locate_python,
// locate_pythonpath), or in KBV_PROMPTS_DIR. Every file's SHA-256 goes into each generation's row.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kbv::generate {

// "one-shot" -> one_shot.md, "input-blind" -> input_blind.md.
std::vector<std::string> prompt_kinds();

struct PromptSet {
  std::string kind;      // one-shot or input-blind
  std::string hardware;  // "" or e.g. "H200"
  std::string template_text, example_model, example_model_new, hardware_notes;
  nlohmann::json file_sha256 = nlohmann::json::object();  // file (relative to the folder) -> hash
};

// Reads the files; throws std::runtime_error naming a missing one (and, for the hardware notes,
// the ones that exist).
PromptSet load_prompt_set(const std::filesystem::path& dir, const std::string& kind,
                          const std::string& hardware);

// {{name}} -> vars[name]; a placeholder without a value throws std::runtime_error, so a template
// that asks for something kbv does not supply fails at once, not as a prompt with a hole.
std::string render_template(std::string_view text, const std::map<std::string, std::string>& vars);

std::string render_prompt(const PromptSet& set, const std::string& problem_source);

struct ShownSources {
  std::filesystem::path prompts_dir;  // where the package's templates are
  std::string example_model;  // the example Model, shown the way the problems are (input-blind)
  std::map<std::string, std::string> sources;  // problem path -> text shown
  std::map<std::string, std::string> errors;   // problem path -> why not (syntax error)
};

// Runs `python -m kbv.prompt_source` once for every problem.
ShownSources shown_sources(const std::vector<std::filesystem::path>& problems, bool input_blind);

}  // namespace kbv::generate
