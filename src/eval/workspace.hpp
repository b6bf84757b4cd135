// The folders of an evaluation. Run directories (the reference's) and candidate folders share
// one parent, `<work root>/kbv-runs`, which each candidate sees replaced by an empty tmpfs
// holding only its own folder: other runs' golden outputs and other candidates' files are out of
// its sight (docs/architecture.md, "The candidate's sandbox").
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace kbv::eval {

// Who owns a work folder: an exclusive flock on `<folder>/.kbv-owner`, held for as long as this
// lives by the kbv process that made the folder. The kernel drops the lock when that process
// ends, however it ends (Ctrl-C, kill -9, a crash), so the next kbv to start can tell an
// abandoned folder from one in use and reclaim it (reclaim_abandoned_folders). A folder to be
// kept (--keep-work-dir) says so in the file and is never reclaimed.
class FolderOwner {
 public:
  FolderOwner() = default;
  FolderOwner(const std::filesystem::path& folder, bool keep);
  FolderOwner(FolderOwner&& other) noexcept;
  FolderOwner& operator=(FolderOwner&& other) noexcept;
  FolderOwner(const FolderOwner&) = delete;
  FolderOwner& operator=(const FolderOwner&) = delete;
  ~FolderOwner();

 private:
  int fd_ = -1;
};

struct PrivateDir {
  std::filesystem::path path;
  FolderOwner owner;
};

// A new private folder `<root or temp>/kbv-runs/<prefix>-XXXXXX` with the given subfolders, owned
// by this process; absolute and normal, since the reference's answers carry normalised paths,
// which the candidate's requests are rewritten from (rebase_paths).
PrivateDir make_private_dir(const std::filesystem::path& root, const char* prefix,
                            std::initializer_list<const char*> subs, bool keep);

// A reference session's run directory: inputs/, state/, golden/.
PrivateDir make_run_dir(const std::filesystem::path& root, bool keep);

// The folder that holds run directories and candidate folders: `<root or temp>/kbv-runs`.
std::filesystem::path work_root(const std::filesystem::path& root);

struct Reclaimed {
  int folders = 0;
  std::uintmax_t bytes = 0;
};

// Removes the work folders a killed kbv left behind: every folder of `<root or temp>/kbv-runs`
// and every `kbv-build-*` folder of the root whose owner file is no longer locked, unless it was
// to be kept. Folders in use by a live kbv, kept folders, and folders without an owner file (not
// kbv's, or just being made) are left alone.
Reclaimed reclaim_abandoned_folders(const std::filesystem::path& root);

// Makes `to` hold the regular files of `from` (hard links, copies where a link fails), and
// nothing else. Throws std::filesystem::filesystem_error when neither works (the machine's fault,
// not the candidate's: a harness fault, disk_full when the copy's errno says so).
void mirror_files(const std::filesystem::path& from, const std::filesystem::path& to);

// `value` with every string under `from` rewritten to the same path under `to`.
nlohmann::json rebase_paths(const nlohmann::json& value, const std::string& from,
                            const std::string& to);

// 32 random bytes from /dev/urandom, hex: a session's secret seed for the hidden draws.
std::string random_secret();

}  // namespace kbv::eval
