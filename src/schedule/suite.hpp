// `kbv run`: every (problem, candidate) pair of a suite, built in parallel beside the evaluation,
// evaluated several at a time per device with one timing at a time per device, each result
// stored as it finishes; a rerun resumes where it stopped (schedule/resume.hpp).
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/eval_request.hpp"
#include "schedule/discovery.hpp"
#include "schedule/shard.hpp"

namespace kbv::schedule {

struct SuiteRequest {
  std::filesystem::path problems;
  std::filesystem::path candidates;
  std::filesystem::path database;
  // Settings, limits and placement (cache, work dir, progress); problem and candidate are per
  // task, and the placement's reference slot, gate and worker ahead are the suite's own.
  eval::EvalRequest settings;
  int build_jobs = 2;  // candidates built at once, ahead of evaluation
  // The devices, pulling from one queue. Empty: settings.device alone. The same device may be
  // named twice ("cpu,cpu") to run two evaluations side by side.
  std::vector<std::string> devices;
  // Evaluations at once on each device (0: default_workers_per_device). They overlap everything
  // but timing, which holds the device alone (eval/device_gate.hpp): one measurement per device.
  int workers_per_device = 0;
  // Problems taken level by level in turn (level1's first, level2's first, ..., then each
  // level's second) rather than in path order. kbv audit: KernelBench's large level-1 problems
  // then run beside the small ones of levels 2 and 3 (the device's memory ledger admits them
  // together) instead of after one another, each waiting for the last one's memory.
  bool interleave_levels = false;
  // This machine's part of the suite (schedule/shard.hpp); tasks of other shards are not
  // evaluated, counted or reported here.
  Shard shard;
};

// A task that ended as harness_error: a fault of kbv, not a verdict on the candidate.
struct HarnessErrorNote {
  std::filesystem::path path;  // the candidate
  std::string kind;            // disk_full, reference_crashed, out_of_memory, channel, internal
  std::string reason;
  bool stored = true;  // false when even storing it failed (the database's disk is full)
};

// The order of SuiteRequest::interleave_levels (tasks sorted by problem path in; a problem's
// candidates stay together).
void interleave_by_level(std::vector<const Task*>& ordered);

struct SuiteSummary {
  int tasks = 0;           // this shard's (the suite's, unsharded)
  int suite_tasks = 0;     // every shard's together
  int shard_problems = 0;  // problems with candidates in this shard
  int already_done = 0;
  int evaluated_again = 0;       // stored timeouts retried under a longer timeout
  int harness_errors_again = 0;  // stored harness errors evaluated again (always)
  int evaluated = 0;
  std::map<std::string, int> verdicts;
  std::vector<Unmatched> unmatched;
  // Problems the reference could not load or run: their tasks were not evaluated (nothing is
  // stored, so a rerun retries them). Always reported, also in quiet mode.
  std::vector<Unmatched> broken_problems;
  // Tasks that ended as harness_error (kbv's own fault, including kbv's own bugs, which were once
  // "failed inside kbv"): stored so a user sees them, left out of every figure of kbv report, and
  // evaluated again by a rerun. Always reported.
  std::vector<HarnessErrorNote> harness_errors;
  double build_seconds = 0, evaluation_seconds = 0;
  // Where the time went, summed over this run's results (durations_s.split of each): compile
  // (the build ahead of evaluation plus loading the candidate), reference (calls to the
  // reference worker), candidate (calls to the candidate worker, loading excepted), idle (the
  // rest of each evaluation: process starts, comparisons, file work).
  nlohmann::json split = nlohmann::json::object();
  int reference_sessions = 0;  // reference workers started (problem x device x key)
  // Tasks put back to be evaluated after those that share their device, their evaluation
  // needing the device's memory to itself (TaskPicker::postpone).
  int postponed = 0;
  // Tasks no device thread evaluated (their device failed its health check once the others had
  // stopped), apart from broken problems': nothing stored, a rerun evaluates them. Always
  // reported.
  int not_evaluated = 0;
  // kbv run --ray: the cluster's nodes that evaluated tasks (0: one machine). Their builds and
  // reference sessions are counted on the nodes, not here.
  int ray_nodes = 0;
};

// "correct 3, incorrect 1" (or "none yet"): the verdict counts of a progress line.
std::string verdict_counts(const std::map<std::string, int>& verdicts);

// Progress goes to `request.settings.placement.progress` as one line per event.
SuiteSummary run_suite(const SuiteRequest& request);

}  // namespace kbv::schedule
