#include "generate/ledger.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

namespace kbv::generate {
namespace fs = std::filesystem;

bool is_final_outcome(std::string_view outcome) {
  return outcome == "ok" || outcome == "several_code_blocks" || outcome == "no_code_block" ||
         outcome == "unterminated_code_block" || outcome == "truncated";
}

SampleKey key_of(const nlohmann::json& row) {
  return {row.at("level").get<int>(), row.at("problem_id").get<int>(), row.at("sample").get<int>()};
}

LedgerState parse_ledger(std::string_view text) {
  LedgerState state;
  size_t last_newline = text.rfind('\n');
  state.complete_bytes = last_newline == std::string_view::npos ? 0 : last_newline + 1;
  std::string_view complete = text.substr(0, state.complete_bytes);
  size_t pos = 0;
  while (pos < complete.size()) {
    size_t end = complete.find('\n', pos);
    std::string_view line = complete.substr(pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object() || !row.contains("level") || !row.contains("problem_id") ||
        !row.contains("sample") || !row["level"].is_number_integer() ||
        !row["problem_id"].is_number_integer() || !row["sample"].is_number_integer()) {
      ++state.unreadable;
      continue;
    }
    if (is_final_outcome(row.value("outcome", ""))) state.final_rows[key_of(row)] = row;
    state.rows.push_back(std::move(row));
  }
  return state;
}

Ledger::Ledger(fs::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "cannot open " + path_.string());
  // One writer per folder: two runs into one folder would both ask for the same missing samples
  // and write their files over each other. The lock goes with the descriptor (and the process).
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw LedgerBusy("another kbv generate is writing " + path_.string());
  }
  std::ifstream in(path_, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  auto content = text.str();
  state_ = parse_ledger(content);
  if (state_.complete_bytes != content.size()) fs::resize_file(path_, state_.complete_bytes);
}

Ledger::~Ledger() {
  if (fd_ >= 0) ::close(fd_);
}

bool Ledger::done(const SampleKey& key) const {
  std::lock_guard lock(mutex_);
  return state_.final_rows.count(key) > 0;
}

void Ledger::append(const nlohmann::json& row) {
  // Invalid UTF-8 in a model's answer is replaced, never a reason to lose the row.
  std::string line = row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard lock(mutex_);
  size_t written = 0;
  while (written < line.size()) {
    ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw std::system_error(errno, std::generic_category(), "cannot write " + path_.string());
    written += static_cast<size_t>(n);
  }
  ::fdatasync(fd_);
  if (is_final_outcome(row.value("outcome", ""))) state_.final_rows[key_of(row)] = row;
  state_.rows.push_back(row);
}

}  // namespace kbv::generate
