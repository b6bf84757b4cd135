// `kbv run --shard I/N`: one machine's part of a suite run. The split is by problem, so every
// candidate of a problem lands on one machine and its reference session stays warm there, and
// it is the same on every machine given the same problem and candidate trees.
//
// The rule: the problems that have candidates, sorted by their path relative to the problem
// root ('/'-separated), are dealt out in turn: the k-th goes to shard k mod N. Dealing in sorted
// order rather than hashing each path keeps the shards within one problem of one another (a hash
// over KernelBench's 250 problems leaves shards a few problems apart) and spreads each level
// over every shard, since the levels' folders sort one after another. Its price: the split
// depends on the whole set of problems, so every shard must see the same trees (`kbv merge`
// stays safe when they do not: rows are content-keyed, and a later `kbv run` on the merged
// database evaluates only what is missing).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "schedule/discovery.hpp"

namespace kbv::schedule {

struct Shard {
  int index = 0;  // 0 <= index < count
  int count = 1;  // 1: the whole suite
  bool whole() const { return count == 1; }
};

// "I/N" with 0 <= I < N and N >= 1; throws eval::UsageError saying what is wrong.
Shard parse_shard(const std::string& text);

// The tasks of `shard`, in their given order; `problems_root` makes each problem's path
// relative, so the split does not depend on where the trees are mounted.
std::vector<Task> tasks_of_shard(const std::vector<Task>& tasks, const Shard& shard,
                                 const std::filesystem::path& problems_root);

}  // namespace kbv::schedule
