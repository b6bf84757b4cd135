// The devices kbv run spreads evaluations over: which GPUs are present (one probe, used by
// `--device` defaults too), how many evaluations share one, and whether one is still healthy.
#pragma once

#include <string>
#include <vector>

#include "core/result.hpp"

namespace kbv::schedule {

// The CUDA GPUs the driver shows (/dev/nvidia0, /dev/nvidia1, ...): the one presence probe.
int visible_cuda_devices();

// "cuda" when a GPU is present, else "cpu": the default of --device.
std::string default_device();

// "all" (every CUDA GPU the driver shows, else cpu), "cpu", or a comma-separated list such as
// "cuda:0,cuda:1". Throws UsageError on anything else.
std::vector<std::string> parse_devices(const std::string& spec);

// Evaluations at once on one device when --workers-per-device is not given. On the CPU, 1: the
// evaluations would share the cores they time on. On a GPU, half the cores over the GPUs,
// between 2 and 4: evaluations overlap their CPU work (process start, torch import, extension
// load, comparisons), but every timing run stops the others' calls on its GPU until the calls in
// flight end, so past 4 they mostly wait for each other
// (docs/results/issue4-suite-bench-h200.md).
int default_workers_per_device(const std::string& device, int cuda_devices, unsigned cores);

// After a crash or hang on a GPU: can a fresh process still allocate, compute and synchronise
// there? A wedged device must not turn every later candidate into a failure.
bool device_healthy(const std::string& device);
// Whether a result may have come from a wedged GPU, so the device is checked after it: a
// runtime error, a timeout, a harness error, or a fault of kbv's that tampering outweighed.
bool worth_a_health_check(const Result& result);

}  // namespace kbv::schedule
