#include "native/gpu_trace_peak.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace kbv::native {
namespace {

struct Block {
  std::int64_t bytes = 0;
  std::string source;
};

struct KeyHash {
  std::size_t operator()(const std::pair<std::uint8_t, std::uint64_t>& key) const {
    return std::hash<std::uint64_t>()(key.second * 31u + key.first);
  }
};

void Subtract(std::map<std::string, std::int64_t>& live, const std::string& source,
              std::int64_t bytes) {
  auto it = live.find(source);
  if (it == live.end()) return;
  it->second -= bytes;
  if (it->second == 0) live.erase(it);
}

}  // namespace

PeakResult PeakFromEvents(std::vector<MemEvent> events) {
  std::stable_sort(events.begin(), events.end(), [](const MemEvent& a, const MemEvent& b) {
    if (a.timestamp_ns != b.timestamp_ns) return a.timestamp_ns < b.timestamp_ns;
    // Allocations before releases at one timestamp.
    return a.op == MemEvent::Op::kAlloc && b.op == MemEvent::Op::kFree;
  });

  PeakResult result;
  std::unordered_map<std::pair<std::uint8_t, std::uint64_t>, Block, KeyHash> live_blocks;
  std::map<std::string, std::int64_t> live_by_source;
  std::int64_t live = 0;

  auto release = [&](auto it) {
    live -= it->second.bytes;
    result.freed_bytes += it->second.bytes;
    Subtract(live_by_source, it->second.source, it->second.bytes);
    live_blocks.erase(it);
  };

  for (MemEvent& event : events) {
    const auto key = std::make_pair(event.space, event.key);
    if (event.op == MemEvent::Op::kAlloc) {
      if (event.bytes <= 0) continue;
      auto existing = live_blocks.find(key);
      if (existing != live_blocks.end()) {
        ++result.duplicate_allocs;
        release(existing);
      }
      ++result.allocations;
      result.allocated_bytes += event.bytes;
      result.by_source_allocated[event.source] += event.bytes;
      live += event.bytes;
      live_by_source[event.source] += event.bytes;
      live_blocks.emplace(key, Block{event.bytes, std::move(event.source)});
      if (live > result.peak_bytes) {
        result.peak_bytes = live;
        result.peak_timestamp_ns = event.timestamp_ns;
        result.by_source_at_peak = live_by_source;
      }
    } else {
      auto it = live_blocks.find(key);
      if (it == live_blocks.end()) {
        ++result.untracked_frees;
        continue;
      }
      ++result.frees;
      release(it);
    }
  }

  result.live_at_exit_bytes = live;
  result.by_source_live_at_exit = std::move(live_by_source);
  return result;
}

}  // namespace kbv::native
