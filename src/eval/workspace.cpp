#include "eval/workspace.hpp"

#include <fmt/format.h>
#include <stdlib.h>

#include <fstream>

#include "eval/eval_request.hpp"

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path make_private_dir(const fs::path& root, const char* prefix,
                          std::initializer_list<const char*> subs) {
  fs::path base = fs::absolute((root.empty() ? fs::temp_directory_path() : root) / "kbv-runs")
                      .lexically_normal();
  fs::create_directories(base);
  std::string pattern = (base / fmt::format("{}-XXXXXX", prefix)).string();
  if (!::mkdtemp(pattern.data())) {
    throw std::runtime_error(fmt::format("cannot create a folder under {}", base.string()));
  }
  fs::path dir(pattern);
  for (const char* sub : subs) fs::create_directories(dir / sub);
  return dir;
}

fs::path make_run_dir(const fs::path& root) {
  return make_private_dir(root, "kbv-run", {"inputs", "state", "golden"});
}

void mirror_files(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(to, ec)) fs::remove_all(entry.path(), ec);
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    if (!entry.is_regular_file()) continue;
    auto target = to / entry.path().filename();
    std::error_code link_error;
    fs::create_hard_link(entry.path(), target, link_error);
    if (!link_error) continue;
    std::error_code copy_error;
    fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing, copy_error);
    if (copy_error) {
      // The machine's fault (disk full, permissions), not the candidate's: nothing is stored,
      // and a rerun retries.
      throw UsageError(fmt::format("cannot give the candidate {} ({}; {})", entry.path().string(),
                                   link_error.message(), copy_error.message()));
    }
  }
}

json rebase_paths(const json& value, const std::string& from, const std::string& to) {
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text.starts_with(from) && (text.size() == from.size() || text[from.size()] == '/')) {
      return to + text.substr(from.size());
    }
    return value;
  }
  if (value.is_array() || value.is_object()) {
    json out = value;
    for (auto& item : out) item = rebase_paths(item, from, to);
    return out;
  }
  return value;
}

std::string random_secret() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    throw std::runtime_error("cannot read /dev/urandom for the secret seed");
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace kbv::eval
