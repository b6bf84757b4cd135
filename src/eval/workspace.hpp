// The folders of an evaluation. Run directories (the reference's) and candidate folders share
// one parent, `<work root>/kbv-runs`, which each candidate sees replaced by an empty tmpfs
// holding only its own folder: other runs' golden outputs and other candidates' files are out of
// its sight (docs/architecture.md, "The candidate's sandbox").
#pragma once

#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace kbv::eval {

// A new private folder `<root or temp>/kbv-runs/<prefix>-XXXXXX` with the given subfolders;
// absolute and normal, since the reference's answers carry normalised paths, which the
// candidate's requests are rewritten from (rebase_paths).
std::filesystem::path make_private_dir(const std::filesystem::path& root, const char* prefix,
                                       std::initializer_list<const char*> subs);

// A reference session's run directory: inputs/, state/, golden/.
std::filesystem::path make_run_dir(const std::filesystem::path& root);

// Makes `to` hold the regular files of `from` (hard links, copies where a link fails), and
// nothing else. Throws UsageError when neither works (the machine's fault, not the candidate's).
void mirror_files(const std::filesystem::path& from, const std::filesystem::path& to);

// `value` with every string under `from` rewritten to the same path under `to`.
nlohmann::json rebase_paths(const nlohmann::json& value, const std::string& from,
                            const std::string& to);

// 32 random bytes from /dev/urandom, hex: a session's secret seed for the hidden draws.
std::string random_secret();

}  // namespace kbv::eval
