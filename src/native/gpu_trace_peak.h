// The accounting behind MemoryTrace: the running total of live device allocations, computed from a
// list of allocation and release events. Pure C++ (no CUDA), so it is unit-tested on any machine
// through kbv_native._peak_from_events.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kbv::native {

struct MemEvent {
  enum class Op : std::uint8_t { kAlloc, kFree };

  std::uint64_t timestamp_ns = 0;
  // What identifies the block: the device address for allocator records, the allocation handle for
  // VMM physical allocations. `space` keeps the two key spaces apart (0: addresses, 1: handles).
  std::uint64_t key = 0;
  std::uint8_t space = 0;
  Op op = Op::kAlloc;
  // Allocations: the block's size. Releases: ignored (the size recorded at allocation is used).
  std::int64_t bytes = 0;
  // Who allocated (a label such as "torch", "cublas", "ext:foo.so" or "kind:device"). Releases are
  // charged to the allocation's source, whatever they carry here.
  std::string source;
};

struct PeakResult {
  // The largest total of live bytes (allocated inside the event list, not yet released) at any
  // point, starting from 0. Blocks allocated before the first event do not count, and neither do
  // their releases.
  std::int64_t peak_bytes = 0;
  // Timestamp of the event that first reached peak_bytes (0 when the peak is 0).
  std::uint64_t peak_timestamp_ns = 0;
  std::int64_t allocated_bytes = 0;     // all allocations
  std::int64_t freed_bytes = 0;         // releases of blocks allocated inside
  std::int64_t live_at_exit_bytes = 0;  // allocated inside and not released: persistent growth
  std::int64_t allocations = 0;
  std::int64_t frees = 0;
  // Releases of blocks not allocated inside (allocated before the trace): ignored for the totals.
  std::int64_t untracked_frees = 0;
  // An allocation of a key that is still live (its release record was lost): the old block is
  // treated as released at that moment. Non-zero means the record stream is incomplete.
  std::int64_t duplicate_allocs = 0;
  // Live bytes of each source at the moment of the peak; sums to peak_bytes.
  std::map<std::string, std::int64_t> by_source_at_peak;
  // All bytes each source allocated (sums to allocated_bytes).
  std::map<std::string, std::int64_t> by_source_allocated;
  // Bytes each source left live at the end (sums to live_at_exit_bytes).
  std::map<std::string, std::int64_t> by_source_live_at_exit;
};

// Orders the events by timestamp (stable: input order among equal timestamps, except that at one
// timestamp every allocation is applied before any release, so the peak is an upper bound when the
// clock cannot separate them) and runs the live total. Allocations of 0 bytes or less are ignored.
PeakResult PeakFromEvents(std::vector<MemEvent> events);

}  // namespace kbv::native
