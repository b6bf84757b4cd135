#include "orchestrate/build_cache.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/hash.hpp"

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

namespace {

// A recorded library that was already another file when recorded never matches anything.
constexpr const char* kReplacedMark = "replaced-before-record";

bool inside(const fs::path& path, const fs::path& folder) {
  auto rel = path.lexically_relative(folder);
  return !rel.empty() && !rel.native().starts_with("..");
}

bool is_startup_hook(const fs::path& path) {
  const std::string name = path.filename().string();
  return path.extension() == ".pth" || name.starts_with("sitecustomize") ||
         name.starts_with("usercustomize");
}

std::string sha256_or_empty(const fs::path& path) {
  try {
    return sha256_file(path);
  } catch (const std::exception&) {
    return "";
  }
}

nlohmann::json read_manifest(const fs::path& cache) {
  std::ifstream in(manifest_path(cache));
  if (!in) return nlohmann::json::object();
  auto text = std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  auto manifest = nlohmann::json::parse(text, nullptr, false);
  return manifest.is_object() ? manifest : nlohmann::json::object();
}

}  // namespace

std::vector<LoadedLibrary> loaded_libraries(const nlohmann::json& extension_files,
                                            const fs::path& cache) {
  std::vector<LoadedLibrary> out;
  if (!extension_files.is_object()) return out;
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(cache, ec);
  for (const auto& [path, record] : extension_files.items()) {
    const fs::path file = fs::path(path).lexically_normal();
    if (!record.is_object() || !inside(file, folder)) continue;
    LoadedLibrary lib;
    lib.relative = file.lexically_relative(folder).string();
    lib.sha256 = record.value("sha256", "");
    lib.inode = record.value("inode", -1LL);
    lib.replaced_before_record = record.contains("mapped_inode") || record.contains("error");
    out.push_back(std::move(lib));
  }
  return out;
}

std::vector<std::string> build_cache_changes(const fs::path& cache,
                                             const std::vector<LoadedLibrary>& loaded,
                                             bool* complete) {
  std::vector<std::string> out;
  bool read = true;
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(cache, ec);
  if (ec) read = false;
  for (const auto& lib : loaded) {
    const fs::path file = folder / lib.relative;
    if (lib.replaced_before_record) {
      out.push_back(fmt::format("{}: replaced under the loaded library before kbv recorded it",
                                lib.relative));
      continue;
    }
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) read = false;
      out.push_back(fmt::format("{}: removed after it was loaded", lib.relative));
    } else if (static_cast<long long>(st.st_ino) != lib.inode) {
      out.push_back(fmt::format("{}: replaced by another file after it was loaded", lib.relative));
    } else if (const std::string sha = sha256_or_empty(file); sha != lib.sha256) {
      if (sha.empty()) read = false;
      out.push_back(fmt::format("{}: changed in place after it was loaded", lib.relative));
    }
  }
  ec.clear();
  for (auto it = fs::recursive_directory_iterator(
           folder, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code kind_ec;
    if (is_startup_hook(it->path()) && !it->is_directory(kind_ec)) {
      out.push_back(fmt::format("{}: a Python start-up hook planted in the build cache",
                                it->path().lexically_relative(folder).string()));
    }
  }
  if (ec) read = false;
  if (complete && !read) *complete = false;
  return out;
}

fs::path manifest_path(const fs::path& cache) {
  fs::path folder = cache.lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  return folder.parent_path() / (folder.filename().string() + ".kbv-loaded.json");
}

std::vector<std::string> manifest_mismatches(const fs::path& cache,
                                             const std::vector<LoadedLibrary>& loaded) {
  std::vector<std::string> out;
  const auto manifest = read_manifest(cache);
  for (const auto& lib : loaded) {
    auto it = manifest.find(lib.relative);
    if (it == manifest.end() || !it->is_string()) continue;
    if (it->get<std::string>() != lib.sha256 || lib.replaced_before_record) {
      out.push_back(fmt::format(
          "{}: the library loaded is not the one first built and loaded for this content",
          lib.relative));
    }
  }
  return out;
}

void record_in_manifest(const fs::path& cache, const std::vector<LoadedLibrary>& loaded) {
  auto manifest = read_manifest(cache);
  bool added = false;
  for (const auto& lib : loaded) {
    if (manifest.contains(lib.relative)) continue;
    manifest[lib.relative] = lib.replaced_before_record ? kReplacedMark : lib.sha256;
    added = true;
  }
  if (!added) return;
  // Written whole under another name, then renamed: a concurrent reader sees one or the other.
  const fs::path target = manifest_path(cache);
  const fs::path staged = target.string() + fmt::format(".{}", ::getpid());
  {
    std::ofstream out(staged);
    out << manifest.dump(1) << "\n";
  }
  std::error_code ec;
  fs::rename(staged, target, ec);
}

}  // namespace kbv::orchestrate
