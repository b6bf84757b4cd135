// The content-keyed build cache of candidate extensions, shared by the evaluation (the
// candidate worker's TORCH_EXTENSIONS_DIR) and kbv run's builds ahead of evaluation.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kbv::orchestrate {

// The build cache folder a candidate's extensions go to: keyed by its content and the device
// kind; the worker adds a `torch-<version>` level below it (it alone knows the version), so
// nothing is built twice and nothing built against another torch is loaded.
std::filesystem::path extension_cache_dir(const std::filesystem::path& cache_root,
                                          const std::string& candidate_sha256,
                                          const std::string& device);

// Written into a candidate's cache folder once a build-ahead import of it succeeded: a warm run
// starts no build worker for it (torch's own check still guards the library itself).
inline constexpr const char* kBuiltMarker = ".kbv-built";

// Whether importing the candidate may compile an extension (its source names torch's
// cpp_extension module or load_inline), so a build worker should import it ahead of evaluation.
// A file that does not is left to its evaluation: importing it twice would only cost a worker
// start and a torch import. Only scheduling rests on this; a build it misses (a name assembled at
// run time) still happens, inside the evaluation, under the same timeout. Unreadable: true.
bool builds_on_import(const std::filesystem::path& candidate);

// -- the build cache's guard (docs/threat-model.md, "library swap" and "start-up hooks") ------
// A candidate's worker may write its own cache folder (it builds there), so a library it loaded
// can be replaced there afterwards and every later load of the same content would run a library
// whose source nobody scanned. The worker records each library as torch loaded it (python/kbv
// guards.py ExtensionCalls: path, SHA-256, inode, and the inode it mapped when the file at the
// path already is another); kbv compares the folder with that record once the worker has ended,
// and keeps, beside the folder where no candidate can write, the libraries first loaded for
// this content (the manifest), against which every later load is compared.

// One library a worker loaded from a candidate's cache folder, as it recorded it.
struct LoadedLibrary {
  std::string relative;  // path inside the cache folder
  std::string sha256;
  long long inode = -1;
  // The file at the path was already another than the one mapped when the record was made.
  bool replaced_before_record = false;
};

// The records of `extension_files` (a worker's answer) that lie inside `cache`; libraries built
// elsewhere (in its scratch, which goes with it) are not the cache's concern.
std::vector<LoadedLibrary> loaded_libraries(const nlohmann::json& extension_files,
                                            const std::filesystem::path& cache);

// What is wrong with `cache` now, given what was loaded from it: a library replaced or changed
// since (or before) its record, and Python start-up hooks (`*.pth`, `sitecustomize*`,
// `usercustomize*`) planted anywhere in the folder. One line each; empty when all is well.
// `complete` (when given) is set false (never true) where something could not be read (the folder,
// a library's status or bytes): a line made of such a failure is no proof of tampering.
std::vector<std::string> build_cache_changes(const std::filesystem::path& cache,
                                             const std::vector<LoadedLibrary>& loaded,
                                             bool* complete = nullptr);

// The manifest of `cache`: a sibling file (outside the folder the sandbox lets a worker write).
std::filesystem::path manifest_path(const std::filesystem::path& cache);
// Loaded libraries that differ from the manifest's first record of the same path.
std::vector<std::string> manifest_mismatches(const std::filesystem::path& cache,
                                             const std::vector<LoadedLibrary>& loaded);
// Adds the libraries the manifest does not know yet (never changes a recorded one). A library
// already replaced when it was recorded is recorded as such: no later load can match it.
void record_in_manifest(const std::filesystem::path& cache,
                        const std::vector<LoadedLibrary>& loaded);

}  // namespace kbv::orchestrate
