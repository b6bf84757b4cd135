// The GPU tracer's reduction (src/native/gpu_trace_reduction.cpp) on hand-made records: window and
// device filters, MEMORY2 against API-callback records of the same call, sources and their labels,
// VMM, pools, kernels and local memory, activities, and the counts and notes that say a trace is
// incomplete. No CUDA: what the collector would have copied out of CUPTI is written here directly.

#include "native/gpu_trace_reduction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "native/allocation_source.h"

namespace kbv::native {
namespace {

constexpr std::uint64_t kStart = 1'000;
constexpr std::uint64_t kEnd = 9'000;

// A block on device 0, window [kStart, kEnd], callbacks on, stack limit 1 KiB before and after
// (no growth) on a device of 1,000 resident threads.
TraceBlock Block() {
  TraceBlock block;
  block.device = 0;
  block.start_ns = kStart;
  block.end_ns = kEnd;
  block.callbacks_enabled = true;
  block.stack_limit_before = 1024;
  block.stack_limit_after = 1024;
  block.thread_capacity = 1000;
  return block;
}

MemoryRecord Memory2(std::uint64_t t, std::uint64_t address, std::uint64_t bytes, MemoryOp op,
                     std::uint32_t correlation = 0, std::string source = "",
                     MemoryKind kind = MemoryKind::kDevice, std::uint32_t device = 0) {
  MemoryRecord m;
  m.timestamp = t;
  m.address = address;
  m.bytes = bytes;
  m.op = op;
  m.correlation = correlation;
  m.source = std::move(source);
  m.kind = kind;
  m.device = device;
  return m;
}

MemoryRecord Alloc2(std::uint64_t t, std::uint64_t address, std::uint64_t bytes,
                    std::uint32_t correlation = 0, std::string source = "") {
  return Memory2(t, address, bytes, MemoryOp::kAllocation, correlation, std::move(source));
}

MemoryRecord Free2(std::uint64_t t, std::uint64_t address, std::uint32_t correlation = 0) {
  return Memory2(t, address, 0, MemoryOp::kRelease, correlation);
}

ApiAllocRecord ApiAlloc(std::uint64_t t, std::uint64_t address, std::uint64_t bytes,
                        std::uint32_t correlation, std::string source = "", int device = 0) {
  ApiAllocRecord a;
  a.alloc = true;
  a.timestamp = t;
  a.address = address;
  a.bytes = bytes;
  a.correlation = correlation;
  a.source = std::move(source);
  a.device = device;
  return a;
}

ApiAllocRecord ApiFree(std::uint64_t t, std::uint64_t address, std::uint32_t correlation,
                       int device = 0) {
  ApiAllocRecord a;
  a.alloc = false;
  a.timestamp = t;
  a.address = address;
  a.correlation = correlation;
  a.device = device;
  return a;
}

VmmRecord Vmm(VmmRecord::Op op, std::uint64_t t, std::uint64_t handle, std::uint64_t bytes,
              std::uint32_t correlation, int device = 0) {
  VmmRecord v;
  v.op = op;
  v.timestamp = t;
  v.handle = handle;
  v.bytes = bytes;
  v.correlation = correlation;
  v.device = device;
  return v;
}

KernelRecord Kernel(std::uint64_t start, std::uint64_t end, std::string name = "",
                    std::uint32_t stream = 7, std::uint32_t device = 0) {
  KernelRecord k;
  k.start = start;
  k.end = end;
  k.name = std::move(name);
  k.stream = stream;
  k.device = device;
  return k;
}

bool HasNoteStartingWith(const MemoryTraceResult& r, const std::string& prefix) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
}

TEST(GpuTraceReduction, AnEmptyTraceCountsNothingAndKeepsTheSessionsFigures) {
  TraceBlock block = Block();
  block.notes = {"from enter"};
  const MemoryTraceResult r = ReduceTrace(block, {});
  EXPECT_EQ(r.peak.peak_bytes, 0);
  EXPECT_EQ(r.peak_excluding_torch_bytes, 0);
  EXPECT_EQ(r.allocations_counted_via, "none");
  EXPECT_EQ(r.attribution, "memory_kind");
  EXPECT_EQ(r.vmm_counted_via, "none");
  EXPECT_EQ(r.start_ns, kStart);
  EXPECT_EQ(r.end_ns, kEnd);
  EXPECT_EQ(r.stack_limit_before, 1024);
  EXPECT_EQ(r.stack_limit_after, 1024);
  EXPECT_EQ(r.thread_capacity, 1000);
  EXPECT_EQ(r.local_memory_bytes, 0);
  EXPECT_EQ(r.local_memory_above_default_bytes, 0);
  EXPECT_EQ(r.kernels, 0);
  EXPECT_TRUE(r.activities.empty());
  EXPECT_EQ(r.notes, std::vector<std::string>{"from enter"});
}

TEST(GpuTraceReduction, Memory2RecordsAloneMakeThePeakUnderMemoryKindLabels) {
  CollectedTrace c;
  c.memory = {Alloc2(2000, 0xA0, 100), Alloc2(3000, 0xB0, 50), Free2(4000, 0xA0),
              Alloc2(5000, 0xC0, 30)};
  c.memory.push_back(Memory2(5500, 0xD0, 8, MemoryOp::kAllocation, 0, "", MemoryKind::kManaged));
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.memory_records, 5);
  EXPECT_EQ(r.allocations_counted_via, "memory2");
  EXPECT_EQ(r.attribution, "memory_kind");
  EXPECT_EQ(r.peak.peak_bytes, 150);
  EXPECT_EQ(r.peak.peak_timestamp_ns, 3000u);
  EXPECT_EQ(r.peak.live_at_exit_bytes, 88);
  EXPECT_EQ(r.peak.by_source_allocated.at("kind:device"), 180);
  EXPECT_EQ(r.peak.by_source_allocated.at("kind:managed"), 8);
  EXPECT_EQ(r.peak_excluding_torch_bytes, 150);
  EXPECT_TRUE(r.by_library_allocated.empty());
}

TEST(GpuTraceReduction, ACallbackOfACallMemory2ReportedIsNotCountedTwice) {
  CollectedTrace c;
  c.memory = {Alloc2(2000, 0xA0, 100, /*correlation=*/7), Free2(4000, 0xA0, 8)};
  c.api_allocs = {ApiAlloc(2001, 0xA0, 100, 7), ApiFree(4001, 0xA0, 8)};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.api_allocation_records, 2);
  EXPECT_EQ(r.api_allocations_counted, 0);
  EXPECT_EQ(r.allocations_counted_via, "memory2");
  EXPECT_EQ(r.peak.peak_bytes, 100);
  EXPECT_EQ(r.peak.allocations, 1);
  EXPECT_EQ(r.peak.frees, 1);
  EXPECT_EQ(r.peak.duplicate_allocs, 0);
  EXPECT_EQ(r.peak.untracked_frees, 0);
}

TEST(GpuTraceReduction, CallbacksAloneCountWhenMemory2IsSilent) {
  CollectedTrace c;
  c.api_allocs = {ApiAlloc(2000, 0xA0, 100, 1, "/site-packages/torch/lib/libc10_cuda.so"),
                  ApiAlloc(3000, 0xB0, 40, 2, "/tmp/build/my_ext.so"), ApiFree(4000, 0xB0, 3),
                  ApiAlloc(5000, 0xC0, 10, 4, "/tmp/build/my_ext.so")};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.memory_records, 0);
  EXPECT_EQ(r.api_allocation_records, 4);
  EXPECT_EQ(r.api_allocations_counted, 4);
  EXPECT_EQ(r.allocations_counted_via, "callback");
  EXPECT_EQ(r.attribution, "library");
  EXPECT_EQ(r.peak.peak_bytes, 140);
  EXPECT_EQ(r.peak.by_source_at_peak.at("torch"), 100);
  EXPECT_EQ(r.peak.by_source_at_peak.at("ext:my_ext.so"), 40);
  // Without torch the running peak is 40 (at 3000), not 140 - 100: the 10 came after the free.
  EXPECT_EQ(r.peak_excluding_torch_bytes, 40);
  EXPECT_EQ(r.by_library_allocated.at("libc10_cuda.so"), 100);
  EXPECT_EQ(r.by_library_allocated.at("my_ext.so"), 50);
}

TEST(GpuTraceReduction, BothSourcesCountedReadMemory2PlusCallback) {
  CollectedTrace c;
  c.memory = {Alloc2(2000, 0xA0, 100, 1)};
  c.api_allocs = {ApiAlloc(2001, 0xA0, 100, 1), ApiAlloc(3000, 0xB0, 20, 2)};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.allocations_counted_via, "memory2+callback");
  EXPECT_EQ(r.api_allocations_counted, 1);
  EXPECT_EQ(r.peak.peak_bytes, 120);
}

TEST(GpuTraceReduction, ACallbackReleasePairsWithAMemory2Allocation) {
  CollectedTrace c;
  c.memory = {Alloc2(2000, 0xA0, 100, 1)};
  c.api_allocs = {ApiFree(3000, 0xA0, 2)};  // MEMORY2 missed the release
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.peak.frees, 1);
  EXPECT_EQ(r.peak.live_at_exit_bytes, 0);
  EXPECT_EQ(r.peak.by_source_allocated.at("kind:device"), 100);
}

TEST(GpuTraceReduction, OtherDevicesAreCountedApartAndAnUnknownDeviceIsTheTracedOne) {
  CollectedTrace c;
  c.memory = {Memory2(2000, 0xA0, 100, MemoryOp::kAllocation, 1, "", MemoryKind::kDevice, 1)};
  c.api_allocs = {ApiAlloc(3000, 0xB0, 30, 2, "", /*device=*/1),
                  ApiAlloc(4000, 0xC0, 5, 3, "", /*device=*/-1)};
  c.kernels = {Kernel(2500, 2600, "", 7, /*device=*/1)};
  c.pools = {PoolRecord{2500, 1 << 20, 1 << 10, /*device=*/1}};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.other_device_records, 2);
  EXPECT_EQ(r.memory_records, 0);
  EXPECT_EQ(r.api_allocation_records, 2);
  EXPECT_EQ(r.api_allocations_counted, 1);
  EXPECT_EQ(r.peak.peak_bytes, 5);
  EXPECT_EQ(r.peak.by_source_allocated.at("unknown"), 5);
  EXPECT_EQ(r.kernels, 0);
  EXPECT_EQ(r.pool_records, 0);
  EXPECT_EQ(r.pool_peak_size_bytes, 0);
}

TEST(GpuTraceReduction, ACallbackOfAnotherDeviceIsStillDedupedByCorrelationFirst) {
  // MEMORY2 reported the call on this device; the callback read another device from the thread's
  // context. The correlation wins: the callback is neither counted nor an other-device record.
  CollectedTrace c;
  c.memory = {Alloc2(2000, 0xA0, 100, 9)};
  c.api_allocs = {ApiAlloc(2001, 0xA0, 100, 9, "", /*device=*/3)};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.other_device_records, 0);
  EXPECT_EQ(r.api_allocations_counted, 0);
  EXPECT_EQ(r.peak.peak_bytes, 100);
}

TEST(GpuTraceReduction, OnlyRecordsInsideTheWindowBothEndsIncludedCount) {
  CollectedTrace c;
  c.memory = {Alloc2(kStart - 1, 0x1, 1), Alloc2(kStart, 0x2, 10), Alloc2(kEnd, 0x3, 100),
              Alloc2(kEnd + 1, 0x4, 1000)};
  c.api_allocs = {ApiAlloc(kStart - 1, 0x5, 10000, 50), ApiAlloc(kEnd + 1, 0x6, 10000, 51)};
  c.vmm = {Vmm(VmmRecord::Op::kCreate, kEnd + 1, 0x7, 100000, 60)};
  c.kernels = {Kernel(kStart - 1, kStart + 10), Kernel(kEnd + 1, kEnd + 5)};
  c.pools = {PoolRecord{kEnd + 1, 1 << 20, 1 << 10, 0}};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.memory_records, 2);
  EXPECT_EQ(r.peak.peak_bytes, 110);
  EXPECT_EQ(r.api_allocation_records, 0);
  EXPECT_EQ(r.vmm_events, 0);
  EXPECT_EQ(r.kernels, 0);
  EXPECT_EQ(r.pool_records, 0);
  EXPECT_EQ(r.allocations_counted_via, "memory2");
}

TEST(GpuTraceReduction, AReleaseOfABlockAllocatedBeforeTheWindowIsUntracked) {
  CollectedTrace c;
  c.memory = {Alloc2(kStart - 5, 0xA0, 100), Free2(2000, 0xA0), Alloc2(3000, 0xB0, 10)};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.peak.untracked_frees, 1);
  EXPECT_EQ(r.peak.peak_bytes, 10);
  EXPECT_EQ(r.peak.freed_bytes, 0);
}

TEST(GpuTraceReduction, OperationsOtherThanAllocationAndReleaseAreSkippedUncounted) {
  CollectedTrace c;
  c.memory = {Memory2(2000, 0xA0, 100, MemoryOp::kOther, 1, "", MemoryKind::kDevice, 0),
              Memory2(2000, 0xB0, 100, MemoryOp::kOther, 2, "", MemoryKind::kDevice, 1)};
  c.api_allocs = {ApiAlloc(2001, 0xA0, 100, 1)};  // not deduped: the record was skipped
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.memory_records, 0);
  EXPECT_EQ(r.other_device_records, 0);
  EXPECT_EQ(r.api_allocations_counted, 1);
  EXPECT_EQ(r.peak.peak_bytes, 100);
}

TEST(GpuTraceReduction, HostAllocationsAreReportedApartFromThePeak) {
  CollectedTrace c;
  c.memory = {Memory2(2000, 0xA0, 64, MemoryOp::kAllocation, 1, "", MemoryKind::kPinned),
              Memory2(2100, 0xB0, 32, MemoryOp::kAllocation, 2, "", MemoryKind::kPageable),
              Memory2(2200, 0xA0, 64, MemoryOp::kRelease, 3, "", MemoryKind::kPinned),
              Memory2(2300, 0xC0, 16, MemoryOp::kAllocation, 4, "", MemoryKind::kUnknown)};
  // A callback of the pinned call (same correlation) is deduped even though MEMORY2's record was
  // not counted toward the peak.
  c.api_allocs = {ApiAlloc(2001, 0xA0, 64, 1)};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.host_allocated_bytes, 96);
  EXPECT_EQ(r.memory_records, 1);  // the unknown kind counts, to be safe
  EXPECT_EQ(r.peak.peak_bytes, 16);
  EXPECT_EQ(r.peak.by_source_allocated.at("kind:unknown"), 16);
  EXPECT_EQ(r.api_allocations_counted, 0);
}

TEST(GpuTraceReduction, TheCallingLibraryFromTheStackOverridesCuptisSource) {
  CollectedTrace c;
  // CUPTI names torch for an allocation made through ctypes; the callback's stack says ctypes.
  c.memory = {Alloc2(2000, 0xA0, 100, 1, "/torch/lib/libc10_cuda.so"),
              Alloc2(3000, 0xB0, 50, 2, "/torch/lib/libc10_cuda.so")};
  c.api_allocs = {ApiAlloc(2001, 0xA0, 100, 1, "/usr/lib/libffi.so.8"),
                  ApiAlloc(3001, 0xB0, 50, 2, "/torch/lib/libc10_cuda.so")};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.sources_from_stack, 1);  // the second agreed with CUPTI
  EXPECT_EQ(r.attribution, "library");
  EXPECT_EQ(r.peak.by_source_allocated.at("ctypes"), 100);
  EXPECT_EQ(r.peak.by_source_allocated.at("torch"), 50);
  EXPECT_EQ(r.peak_excluding_torch_bytes, 100);
  EXPECT_EQ(r.by_library_allocated.at("libffi.so.8"), 100);
  EXPECT_EQ(r.by_library_allocated.at("libc10_cuda.so"), 50);
  EXPECT_EQ(r.api_allocations_counted, 0);
}

TEST(GpuTraceReduction, CuptisOwnAllocationsAreTracerBytesNotPeak) {
  CollectedTrace c;
  c.memory = {Alloc2(2000, 0xA0, 4096, 1, "/usr/local/cuda/lib64/libcupti.so.13"),
              Free2(2500, 0xA0, 2), Alloc2(3000, 0xB0, 10, 3)};
  c.api_allocs = {ApiAlloc(3500, 0xC0, 1024, 4, "/x/libcupti.so.13")};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.tracer_allocated_bytes, 4096 + 1024);
  EXPECT_EQ(r.peak.peak_bytes, 10);
  // Its release is not dropped with it: it finds no live block and reads as untracked.
  EXPECT_EQ(r.peak.untracked_frees, 1);
  EXPECT_EQ(r.by_library_allocated.at("libcupti.so.13"), 4096 + 1024);
  EXPECT_EQ(r.api_allocations_counted, 1);  // counted as a call, not as bytes
}

TEST(GpuTraceReduction, ACallbackWithoutSourceIsUnknownAndLeavesAttributionByKind) {
  CollectedTrace c;
  c.api_allocs = {ApiAlloc(2000, 0xA0, 100, 1, "")};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.attribution, "memory_kind");
  EXPECT_EQ(r.peak.by_source_at_peak.at("unknown"), 100);
  EXPECT_TRUE(r.by_library_allocated.empty());
}

TEST(GpuTraceReduction, VmmIsCountedFromTheCallbacksInItsOwnKeySpace) {
  CollectedTrace c;
  // Handle 0xA0 is also a device address: the key spaces keep the two apart.
  c.vmm = {Vmm(VmmRecord::Op::kCreate, 2000, 0xA0, 1 << 21, 1),
           Vmm(VmmRecord::Op::kMap, 2100, 0, 0, 2), Vmm(VmmRecord::Op::kUnmap, 2900, 0, 0, 3),
           Vmm(VmmRecord::Op::kRelease, 3000, 0xA0, 0, 4),
           Vmm(VmmRecord::Op::kCreate, 3500, 0xB0, 1 << 20, 5, /*device=*/1)};
  c.memory = {Alloc2(2500, 0xA0, 100, 10), Free2(2600, 0xA0, 11)};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.vmm_events, 5);
  EXPECT_EQ(r.vmm_maps, 2);
  EXPECT_EQ(r.vmm_counted_via, "callback");
  EXPECT_EQ(r.peak.peak_bytes, (1 << 21) + 100);
  EXPECT_EQ(r.peak.by_source_allocated.at("vmm"), 1 << 21);  // not the other device's
  EXPECT_EQ(r.peak.live_at_exit_bytes, 0);
  EXPECT_EQ(r.peak.duplicate_allocs, 0);
}

TEST(GpuTraceReduction, VmmIsLeftToMemory2WhenItReportedTheSameCalls) {
  CollectedTrace c;
  c.vmm = {Vmm(VmmRecord::Op::kCreate, 2000, 0x1, 1 << 21, 1),
           Vmm(VmmRecord::Op::kRelease, 3000, 0x1, 0, 2)};
  c.memory = {Alloc2(2001, 0xA0, 1 << 21, 1), Free2(3001, 0xA0, 2)};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.vmm_counted_via, "memory2");
  EXPECT_EQ(r.vmm_events, 2);
  EXPECT_EQ(r.peak.peak_bytes, 1 << 21);  // once, not twice
  EXPECT_EQ(r.peak.by_source_allocated.count("vmm"), 0u);
}

TEST(GpuTraceReduction, VmmReadsNoneWhenTheCallbacksWereOff) {
  CollectedTrace c;
  c.vmm = {Vmm(VmmRecord::Op::kCreate, 2000, 0x1, 4096, 1)};
  TraceBlock block = Block();
  block.callbacks_enabled = false;
  const MemoryTraceResult r = ReduceTrace(block, c);
  EXPECT_EQ(r.vmm_counted_via, "none");
  // The label only: a record that did arrive is still counted.
  EXPECT_EQ(r.peak.peak_bytes, 4096);
}

TEST(GpuTraceReduction, PoolFiguresAreTheLargestOfPoolAndMemory2Records) {
  CollectedTrace c;
  c.pools = {PoolRecord{2000, 1000, 100, 0}, PoolRecord{3000, 4000, 50, 0}};
  MemoryRecord m = Alloc2(2500, 0xA0, 64, 1);
  m.pool_size = 2000;
  m.pool_utilized = 700;
  c.memory = {m};
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.pool_records, 2);
  EXPECT_EQ(r.pool_peak_size_bytes, 4000);
  EXPECT_EQ(r.pool_peak_utilized_bytes, 700);
}

TEST(GpuTraceReduction, KernelsGiveTheSpanAndTheLocalMemoryGrowth) {
  CollectedTrace c;
  KernelRecord a = Kernel(3000, 3500);
  a.local_per_thread = 2048;
  a.local_total = 1 << 20;
  KernelRecord b = Kernel(2000, kEnd + 500);  // starts inside, ends after: counted
  b.local_per_thread = 512;
  b.local_total = 1 << 22;
  c.kernels = {a, b, Kernel(0, 100)};  // start 0: no timestamp, ignored
  TraceBlock block = Block();
  block.stack_limit_after = 1536;  // below the kernel's 2048: the kernel's need wins
  const MemoryTraceResult r = ReduceTrace(block, c);
  EXPECT_EQ(r.kernels, 2);
  EXPECT_EQ(r.kernel_first_start_ns, 2000u);
  EXPECT_EQ(r.kernel_last_end_ns, kEnd + 500);
  EXPECT_EQ(r.local_memory_per_thread_max, 2048);
  EXPECT_EQ(r.local_memory_reserved_bytes, 1 << 22);
  EXPECT_EQ(r.local_memory_bytes, (2048 - 1024) * 1000);
  EXPECT_EQ(r.local_memory_above_default_bytes, (2048 - 1024) * 1000);
}

TEST(GpuTraceReduction, AWarmCallReadsNoGrowthButTheReservationAboveDefault) {
  TraceBlock block = Block();
  block.stack_limit_before = 4096;  // grown during warm-up
  block.stack_limit_after = 4096;
  const MemoryTraceResult r = ReduceTrace(block, {});
  EXPECT_EQ(r.local_memory_bytes, 0);
  EXPECT_EQ(r.local_memory_above_default_bytes, (4096 - 1024) * 1000);
}

TEST(GpuTraceReduction, AnUnreadableStackLimitLeavesLocalMemoryUnknownWithNotes) {
  TraceBlock block = Block();
  block.stack_limit_before = -1;
  block.stack_limit_after = -1;
  block.stack_limit_after_error = "cudaDeviceGetLimit(cudaLimitStackSize): boom";
  CollectedTrace c;
  KernelRecord k = Kernel(2000, 2100);
  k.local_per_thread = 1 << 16;
  c.kernels = {k};
  const MemoryTraceResult r = ReduceTrace(block, c);
  EXPECT_EQ(r.local_memory_bytes, 0);
  EXPECT_EQ(r.local_memory_above_default_bytes, 0);
  EXPECT_EQ(r.notes,
            (std::vector<std::string>{
                "local memory (exit): cudaDeviceGetLimit(cudaLimitStackSize): boom",
                "local memory growth unknown (stack limit or thread capacity unreadable)"}));
}

TEST(GpuTraceReduction, ActivitiesAreKeptOnlyWhenAskedSortedAndDemangled) {
  CollectedTrace c;
  c.kernels = {Kernel(4000, 4100, "_Z6squarePfi", 3), Kernel(2000, 2100, "f", 3),
               Kernel(2500, 2600, "_Znot_a_symbol", 4), Kernel(2200, 2300, "g", 5, /*device=*/1)};
  c.transfers = {TransferRecord{false, 3000, 3100, 0, 9}, TransferRecord{true, 1500, 1600, 0, 9},
                 TransferRecord{true, 100, 200, 0, 9},      // before the window
                 TransferRecord{false, 0, 0, 0, 9},         // no timestamp
                 TransferRecord{false, 3200, 3300, 1, 9}};  // another device
  TraceBlock block = Block();
  block.record_activities = true;
  const MemoryTraceResult r = ReduceTrace(block, c);
  ASSERT_EQ(r.activities.size(), 5u);
  std::vector<std::string> names;
  for (const ActivityRecord& a : r.activities) names.push_back(a.kind + ":" + a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fill:Memset", "kernel:f", "kernel:_Znot_a_symbol",
                                             "copy:Memcpy", "kernel:square(float*, int)"}));
  EXPECT_EQ(r.activities.back().stream, 3u);
  EXPECT_EQ(r.activities.back().start_ns, 4000u);
  EXPECT_EQ(r.activities.back().end_ns, 4100u);
  EXPECT_EQ(r.kernels, 3);  // copies and fills are not kernels

  block.record_activities = false;
  const MemoryTraceResult without = ReduceTrace(block, c);
  EXPECT_TRUE(without.activities.empty());
  EXPECT_EQ(without.kernels, 3);
}

TEST(GpuTraceReduction, KernelsArePairedWithTheirLauncherByCorrelation) {
  // Who launched each kernel (the launch callbacks' calling library), classified like an
  // allocation's source: what the kernel trace's attribution (no_custom_kernel) reads.
  CollectedTrace c;
  auto kernel = [](std::uint64_t start, std::string name, std::uint32_t correlation) {
    KernelRecord k = Kernel(start, start + 50, std::move(name));
    k.correlation = correlation;
    return k;
  };
  c.kernels = {kernel(2000, "mse_partial_kernel", 11), kernel(2100, "nvjet_tst_64x8", 12),
               kernel(2200, "add_kernel", 13),         kernel(2300, "_ZN2at6native6reduceEv", 14),
               kernel(2400, "replayed", 15),           kernel(2500, "unpaired", 99),
               kernel(2600, "no_correlation", 0)};
  c.launches = {
      {11, false, "/cache/torch_extensions/kbv_mse/kbv_mse.so"},
      {12, false, "/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13"},
      {13, false, "/scratch/.triton/cache/ab/__triton_launcher.so"},
      {14, false, "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so"},
      {15, true, "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so"},
      {0, false, "/cache/torch_extensions/other/other.so"},  // correlation 0 pairs with nothing
  };
  TraceBlock block = Block();
  block.record_activities = true;
  const MemoryTraceResult r = ReduceTrace(block, c);
  ASSERT_EQ(r.activities.size(), 7u);
  std::vector<std::string> launchers;
  for (const ActivityRecord& a : r.activities) launchers.push_back(a.launcher);
  EXPECT_EQ(launchers, (std::vector<std::string>{"ext:kbv_mse.so", "cublas", "triton", "torch",
                                                 "graph", "", ""}));
  EXPECT_EQ(r.launch_records, 6);
  EXPECT_EQ(r.kernels_with_launcher, 5);
}

TEST(GpuTraceReduction, CountsOfTheCollectionPassThroughAndDropsAreNoted) {
  CollectedTrace c;
  c.records = 12;
  c.memory2_seen = 5;
  c.dropped = 3;
  c.record_errors = 1;
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.records, 12);
  EXPECT_EQ(r.memory2_seen, 5);
  EXPECT_EQ(r.dropped, 3);
  EXPECT_EQ(r.record_errors, 1);
  EXPECT_TRUE(HasNoteStartingWith(r, "3 activity records dropped"));
}

TEST(GpuTraceReduction, AnAllocationOfALiveAddressIsADuplicateAndNoted) {
  CollectedTrace c;
  c.memory = {Alloc2(2000, 0xA0, 100), Alloc2(3000, 0xA0, 40)};  // the release was lost
  const MemoryTraceResult r = ReduceTrace(Block(), c);
  EXPECT_EQ(r.peak.duplicate_allocs, 1);
  EXPECT_EQ(r.peak.peak_bytes, 100);
  EXPECT_EQ(r.peak.live_at_exit_bytes, 40);
  EXPECT_TRUE(HasNoteStartingWith(r, "1 allocations of a still-live address"));
}

TEST(GpuTraceReduction, NotesKeepTheSessionsFirstThenTheReductionsInOrder) {
  TraceBlock block = Block();
  block.notes = {"enter", "exit"};
  block.thread_capacity = 0;
  block.stack_limit_after_error = "e";
  CollectedTrace c;
  c.dropped = 1;
  c.memory = {Alloc2(2000, 0xA0, 1), Alloc2(2001, 0xA0, 1)};
  const MemoryTraceResult r = ReduceTrace(block, c);
  ASSERT_EQ(r.notes.size(), 6u);
  EXPECT_EQ(r.notes[0], "enter");
  EXPECT_EQ(r.notes[1], "exit");
  EXPECT_EQ(r.notes[2], "1 activity records dropped: the figure is incomplete");
  EXPECT_EQ(r.notes[3], "local memory (exit): e");
  EXPECT_EQ(r.notes[4], "local memory growth unknown (stack limit or thread capacity unreadable)");
  EXPECT_EQ(r.notes[5], "1 allocations of a still-live address (a release record is missing)");
}

TEST(GpuTraceReduction, AllocationSourcesAreLabelledByLibrary) {
  EXPECT_EQ(ClassifyAllocationSource(""), "unknown");
  EXPECT_EQ(ClassifyAllocationSource("/a/libtorch_cuda.so"), "torch");
  EXPECT_EQ(ClassifyAllocationSource("/a/libtorch_nvshmem.so"), "torch");
  EXPECT_EQ(ClassifyAllocationSource("/a/libnvshmem_host.so.3"), "nvshmem");
  EXPECT_EQ(ClassifyAllocationSource("/a/libcublasLt.so.13"), "cublas");
  EXPECT_EQ(ClassifyAllocationSource("/usr/lib/libcuda.so.1"), "driver");
  EXPECT_EQ(ClassifyAllocationSource("/x/triton/_C/libtriton.so"), "triton");
  EXPECT_EQ(ClassifyAllocationSource("/x/_ctypes.cpython-311.so"), "ctypes");
  EXPECT_EQ(ClassifyAllocationSource("/tmp/ext/my_kernel.so"), "ext:my_kernel.so");
  EXPECT_EQ(ClassifyAllocationSource("python3.11"), "other:python3.11");
  EXPECT_EQ(PathBasename("/a/b/c.so"), "c.so");
  EXPECT_EQ(PathBasename("c.so"), "c.so");
}

}  // namespace
}  // namespace kbv::native
