// The content-keyed build cache of candidate extensions, shared by the evaluation (the
// candidate worker's TORCH_EXTENSIONS_DIR) and kbv run's builds ahead of evaluation.
#pragma once

#include <filesystem>
#include <string>

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

}  // namespace kbv::orchestrate
