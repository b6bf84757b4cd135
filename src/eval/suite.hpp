// `kbv run`: every (problem, candidate) pair of a suite, built in parallel beside the evaluation,
// evaluated several at a time per device with one timing at a time per device, each result
// stored as it finishes; a rerun resumes where it stopped.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "eval/evaluator.hpp"
#include "orchestrate/discovery.hpp"

namespace kbv::eval {

struct SuiteRequest {
  std::filesystem::path problems;
  std::filesystem::path candidates;
  std::filesystem::path database;
  EvalRequest settings;  // device, protocol, size, timeouts...; problem and candidate are per task
  int build_jobs = 2;    // candidates built at once, ahead of evaluation
  // The devices, pulling from one queue. Empty: settings.device alone. The same device may be
  // named twice ("cpu,cpu") to run two evaluations side by side.
  std::vector<std::string> devices;
  // Evaluations at once on each device (0: default_workers_per_device). They overlap everything
  // but timing, which holds the device alone (eval/device_gate.hpp): one measurement per device.
  int workers_per_device = 0;
};

// "all" (every CUDA GPU the driver shows, else cpu), "cpu", or a comma-separated list such as
// "cuda:0,cuda:1". Throws UsageError on anything else.
std::vector<std::string> parse_devices(const std::string& spec);

struct SuiteSummary {
  int tasks = 0;
  int already_done = 0;
  int evaluated = 0;
  std::map<std::string, int> verdicts;
  std::vector<orchestrate::Unmatched> unmatched;
  // Problems the reference could not load or run: their tasks were not evaluated (nothing is
  // stored, so a rerun retries them). Always reported, also in quiet mode.
  std::vector<orchestrate::Unmatched> broken_problems;
  // Tasks whose evaluation failed inside kbv itself (not a verdict): nothing is stored, so a
  // rerun retries them. Always reported.
  std::vector<orchestrate::Unmatched> failed_inside_kbv;
  double build_seconds = 0, evaluation_seconds = 0;
  // Where the time went, summed over this run's results (durations_s.split of each): compile
  // (the build ahead of evaluation plus loading the candidate), reference (calls to the
  // reference worker), candidate (calls to the candidate worker, loading excepted), idle (the
  // rest of each evaluation: process starts, comparisons, file work).
  nlohmann::json split = nlohmann::json::object();
  int reference_sessions = 0;  // reference workers started (problem x device x key)
};

// Evaluations at once on one device when --workers-per-device is not given. On the CPU, 1: the
// evaluations would share the cores they time on. On a GPU, half the cores over the GPUs,
// between 2 and 4: evaluations overlap their CPU work (process start, torch import, extension
// load, comparisons), but every timing run stops the others' calls on its GPU until the calls in
// flight end, so past 4 they mostly wait for each other
// (docs/results/issue4-suite-bench-h200.md).
int default_workers_per_device(const std::string& device, int cuda_devices, unsigned cores);

// Progress goes to `request.settings.progress` as one line per event.
SuiteSummary run_suite(const SuiteRequest& request);

// The build cache folder a candidate's extensions go to: keyed by its content and the device
// kind; the worker adds a `torch-<version>` level below it (it alone knows the version), so
// nothing is built twice and nothing built against another torch is loaded.
std::filesystem::path extension_cache_dir(const std::filesystem::path& cache_root,
                                          const std::filesystem::path& candidate,
                                          const std::string& device);

// Whether importing the candidate may compile an extension (its source names torch's
// cpp_extension module or load_inline), so a build worker should import it ahead of evaluation.
// A file that does not is left to its evaluation: importing it twice would only cost a worker
// start and a torch import. Only scheduling rests on this; a build it misses (a name assembled at
// run time) still happens, inside the evaluation, under the same timeout. Unreadable: true.
bool builds_on_import(const std::filesystem::path& candidate);

}  // namespace kbv::eval
