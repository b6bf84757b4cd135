#include "orchestrate/build_cache.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>

namespace kbv::orchestrate {
namespace fs = std::filesystem;

fs::path extension_cache_dir(const fs::path& cache_root, const std::string& candidate_sha256,
                             const std::string& device) {
  return cache_root / "torch_extensions" /
         fmt::format("{}-{}", candidate_sha256.substr(0, 24),
                     device.starts_with("cuda") ? "cuda" : "cpu");
}

bool builds_on_import(const fs::path& candidate) {
  std::ifstream in(candidate, std::ios::binary);
  if (!in) return true;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find("cpp_extension") != std::string::npos ||
         text.find("load_inline") != std::string::npos;
}

}  // namespace kbv::orchestrate
