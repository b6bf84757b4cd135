// Host-clock timing of a Python callable, for the CPU backend.
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

namespace kbv::native {

// Calls fn(i) for i = 0 .. warmup + calls - 1; the first `warmup` calls are untimed, and each of
// the remaining calls is timed alone on the kernel's CLOCK_MONOTONIC, read by a system call of
// its own (native/integrity.h: nothing a candidate can redirect). Returns milliseconds, one
// sample per timed call. The GIL is held throughout: fn is Python code.
std::vector<double> TimeCpu(const nanobind::callable& fn, int calls, int warmup);

}  // namespace kbv::native
