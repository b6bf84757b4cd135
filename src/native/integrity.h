// The timing path below Python (docs/threat-model.md, "native clock patches"). The candidate
// shares the worker's process, and native code (an extension, ctypes, /proc/self/mem, a forked
// child with ptrace) can rewrite anything in it: the GOT slot through which kbv_native calls a
// clock or a CUDA event function, the first bytes of such a function, the vDSO's clocks,
// kbv_native's own code. This module
//  - gives TimeCpu a clock with no indirection to redirect: CLOCK_MONOTONIC by a system call
//    made here (not libc's, not the vDSO's, not through a GOT slot);
//  - records at import, before any candidate code runs, every GOT slot of kbv_native (resolved
//    at load: the module is linked with -z now), the first bytes of every function they lead to
//    and of the process's clock functions, kbv_native's own code and the vDSO's;
//  - compares them on demand (after every timing batch, and before each CUDA event is recorded
//    or read), notes what changed and puts it back through /proc/self/mem.
// A candidate that also rewrites this check can still win; the harness snapshot in the worker
// (python/kbv/guards.py) reports the notes as `harness_tampered`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbv::native {

// CLOCK_MONOTONIC in nanoseconds, straight from the kernel.
std::int64_t KernelMonotonicNs();

// The record (kbv_native's module init). Idempotent.
void IntegrityInit();

// The GOT slots and entry bytes the CUDA timing path calls through (cuda*): a change is noted
// and put back. Cheap enough to run around every timed sample.
void IntegrityQuickCheck();

// Everything in the record: what changed since the last call (notes of the quick checks and
// timing batches included), one line each, each put back where possible.
std::vector<std::string> IntegrityChanges();

// Runs the full check now and keeps its findings for the next IntegrityChanges() (the end of a
// timing batch, where no Python runs before the samples go back).
void IntegrityNote();

}  // namespace kbv::native
