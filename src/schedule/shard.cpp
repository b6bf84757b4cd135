#include "schedule/shard.hpp"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "eval/eval_request.hpp"

namespace kbv::schedule {
namespace fs = std::filesystem;

namespace {

// The whole of `text` as a number, or nothing (no sign, no spaces, no trailing characters).
std::optional<int> whole_number(std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return {};
  return value;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const auto usage = [&](const std::string& why) {
    return eval::UsageError(fmt::format(
        "--shard takes I/N, this machine's part I of N parts (0 <= I < N, e.g. 0/4): '{}' {}", text,
        why));
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos) throw usage("has no '/'");
  const auto index = whole_number(std::string_view(text).substr(0, slash));
  const auto count = whole_number(std::string_view(text).substr(slash + 1));
  if (!index || !count) throw usage("is not two whole numbers");
  if (*count < 1) throw usage("has N < 1");
  if (*index < 0 || *index >= *count) throw usage("has I outside 0..N-1");
  return {*index, *count};
}

std::vector<Task> tasks_of_shard(const std::vector<Task>& tasks, const Shard& shard,
                                 const fs::path& problems_root) {
  if (shard.whole()) return tasks;
  fs::path root = problems_root.lexically_normal();
  if (!root.has_filename()) root = root.parent_path();  // "problems/" relates like "problems"
  const auto relative = [&](const Task& t) {
    return t.problem.path.lexically_normal().lexically_relative(root).generic_string();
  };
  std::set<std::string> problems;  // sorted: the order every machine agrees on
  for (const auto& t : tasks) problems.insert(relative(t));
  std::map<std::string, int> shard_of;
  int k = 0;
  for (const auto& p : problems) shard_of[p] = k++ % shard.count;
  std::vector<Task> kept;
  for (const auto& t : tasks) {
    if (shard_of.at(relative(t)) == shard.index) kept.push_back(t);
  }
  return kept;
}

}  // namespace kbv::schedule
