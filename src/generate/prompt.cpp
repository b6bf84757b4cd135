#include "generate/prompt.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "core/hash.hpp"
#include "orchestrate/worker_process.hpp"

namespace kbv::generate {
namespace fs = std::filesystem;

std::vector<std::string> prompt_kinds() { return {"one-shot", "input-blind"}; }

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read prompt file " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string chomp(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// The child's stdout, read to its end; the exit status must be 0.
std::string run_capture(const std::vector<std::string>& argv, const std::string& pythonpath) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    if (!pythonpath.empty()) {
      const char* existing = std::getenv("PYTHONPATH");
      std::string path = pythonpath;
      if (existing && *existing) path += std::string(":") + existing;
      ::setenv("PYTHONPATH", path.c_str(), 1);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(argv[0] + " -m kbv.prompt_source failed (status " +
                             std::to_string(status) + "); is the kbv Python package importable?");
  }
  return text;
}

}  // namespace

PromptSet load_prompt_set(const fs::path& dir, const std::string& kind,
                          const std::string& hardware) {
  PromptSet set;
  set.kind = kind;
  set.hardware = hardware;
  std::string template_name;
  if (kind == "one-shot") {
    template_name = "one_shot.md";
  } else if (kind == "input-blind") {
    template_name = "input_blind.md";
  } else {
    throw std::runtime_error("unknown prompt '" + kind + "': one-shot or input-blind");
  }
  auto take = [&](const std::string& name, std::string& into) {
    into = read_file(dir / name);
    set.file_sha256[name] = sha256_hex(into);
  };
  take(template_name, set.template_text);
  take("example_model.py", set.example_model);
  take("example_model_new.py", set.example_model_new);
  if (!hardware.empty()) {
    auto name = "hardware/" + hardware + ".md";
    if (!fs::exists(dir / name)) {
      std::string known;
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(dir / "hardware", ec)) {
        if (entry.path().extension() == ".md")
          known += (known.empty() ? "" : ", ") + entry.path().stem().string();
      }
      throw std::runtime_error("no hardware notes for '" + hardware + "' in " +
                               (dir / "hardware").string() + " (there are: " + known + ")");
    }
    take(name, set.hardware_notes);
  }
  return set;
}

std::string render_template(std::string_view text, const std::map<std::string, std::string>& vars) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    out.append(text.substr(pos, open - pos));
    std::string name(text.substr(open + 2, close - open - 2));
    auto it = vars.find(name);
    if (it == vars.end())
      throw std::runtime_error("the prompt template asks for {{" + name +
                               "}}, which kbv does not supply");
    out.append(it->second);
    pos = close + 2;
  }
  return out;
}

std::string render_prompt(const PromptSet& set, const std::string& problem_source) {
  // The hardware notes are a paragraph of their own between the example and the problem; with
  // none, the template's blank line stays the only separator.
  std::string hardware;
  if (!set.hardware_notes.empty()) hardware = "\n" + chomp(set.hardware_notes) + "\n";
  return render_template(set.template_text, {{"example_model", chomp(set.example_model)},
                                             {"example_model_new", chomp(set.example_model_new)},
                                             {"hardware", hardware},
                                             {"problem_source", chomp(problem_source)}});
}

ShownSources shown_sources(const std::vector<fs::path>& problems, bool input_blind) {
  std::vector<std::string> argv = {orchestrate::locate_python(), "-m", "kbv.prompt_source"};
  if (input_blind) argv.push_back("--input-blind");
  const char* override_dir = std::getenv("KBV_PROMPTS_DIR");
  if (override_dir && *override_dir) {
    argv.push_back("--example");
    argv.push_back((fs::path(override_dir) / "example_model.py").string());
  }
  for (const auto& p : problems) argv.push_back(p.string());
  auto answer = nlohmann::json::parse(run_capture(argv, orchestrate::locate_pythonpath()));
  ShownSources shown;
  shown.prompts_dir = answer.at("prompts_dir").get<std::string>();
  if (override_dir && *override_dir) shown.prompts_dir = override_dir;
  shown.example_model = answer.value("example_model", "");
  shown.sources = answer.at("sources").get<std::map<std::string, std::string>>();
  shown.errors =
      answer.value("errors", nlohmann::json::object()).get<std::map<std::string, std::string>>();
  return shown;
}

}  // namespace kbv::generate
