// How much of the hidden work a problem can keep resident (docs/case-path.md, "The memory
// plan"). Pure: the sizes the reference reports after drawing the first case and the device's
// memory in, a plan out. KernelBench's level-1 inputs reach 17 GB a case, so one evaluation at
// its sizes cannot keep its fifteen cases, and four evaluations side by side on one GPU cannot
// each keep even one of its largest.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kbv::eval {

struct MemoryFacts {
  bool device = false;     // device memory (a GPU) rather than host memory
  double total_bytes = 0;  // of the device (host: physical memory)
  double free_bytes = 0;   // when the problem was loaded (host: MemAvailable)
  double case_bytes = 0;   // one case resident: inputs, state, the outputs it is judged by
  // of those, the outputs it is judged by and their sensitivities (a timing set keeps its own)
  double judged_bytes = 0;
  double output_bytes = 0;     // the candidate's outputs (the slot)
  double draw_peak_bytes = 0;  // the reference's device peak while drawing one case
  // The estimated peak of a deferred sensitivity's runs (0: none deferred), which only a
  // candidate over the floor of its budget needs (docs/protocol.md, deferred sensitivity).
  double sensitivity_peak_bytes = 0;
  double forward_peak_bytes = 0;  // of that, its TF32 forward's own (intermediates, outputs)
  double model_bytes = 0;         // the model's parameters and buffers (the candidate has its own)
  int cases = 0;                  // hidden cases of the protocol
  int timing_sets_wanted = 4;
  int evaluations_per_device = 1;
  bool sessions_ahead = false;  // sessions started ahead share the device (kAheadShare)
};

struct MemoryPlan {
  double cache_bytes = 0;  // cases the reference keeps beyond those in use
  int cached_cases = 0;    // how many cases that is
  int timing_sets = 1;     // timing inputs kept (each with its golden outputs)
  // What one evaluation may hold on the device at its peak: reserved in the device's memory
  // ledger (eval/memory_ledger.hpp) when others share the device.
  double working_bytes = 0;
  // What the sensitivity's runs, deferred by the first draw, add to it: reserved by an
  // evaluation only once a judge (a candidate over the floor) or a later draw (a baseline over
  // the floor) needs them (WorkerExchange::reference), not by every evaluation of the problem.
  double sensitivity_bytes = 0;
  bool alone = false;  // that is more than the ledger's capacity: the device's memory to itself
  std::string fits;    // how it fits, in words (the audit's "fits" column)
  nlohmann::json to_json() const;
};

// The share of memory all reference sessions of a device may keep cases in, and the part of the
// device one evaluation may assume when others run beside it.
inline constexpr double kCacheShare = 0.30;
// Of that share, on a device where kbv run starts the next problem's session ahead (one per
// device thread, drawing beside the evaluation in progress): the part those sessions may hold
// together, reserved in the device's ahead ledger (DeviceGate::ahead) until their evaluation
// takes them over; a draw that does not fit there at once is left to its evaluation, whose
// working memory the memory ledger accounts for. Unaccounted, four sessions ahead could each
// draw up to a quarter of the H200 beside the evaluations' reservations and keep a session's
// share of cases until taken over (session 13: 11 out-of-memory first attempts in 84, some in
// processes holding under 1 GB, the memory held by others).
inline constexpr double kAheadShare = 0.08;
// The share of a device's memory the evaluations on it may reserve for their working memory
// (the memory ledger's capacity): what the cases kept leave, less a margin for the contexts and
// allocator caches of a dozen processes. At 0.6, six evaluations on the H200 still ran it out of
// memory four times in 65 problems (session 10, call 2: 139-143 GB in use), and each such
// failure is evaluated again with the device to itself, which stops every other evaluation.
inline constexpr double kReservableShare = 0.50;

MemoryPlan plan_memory(const MemoryFacts& facts);

// Known before any case is drawn (the problem's inputs and state, described at load): what one
// evaluation of the problem may need at its peak (reserved before drawing), and whether that
// is more than its share of the device (then its cases are not drawn ahead).
//
// Where the reference could run its forward on the meta device at load (shapes only, nothing
// allocated: python/kbv/reference.py `_meta_forward`), that forward's live peak (its
// intermediates and outputs, float32) and its outputs weigh in: 3 x the inputs + 2 x the
// forward's peak + 4.5 x the outputs. A fit to the working bytes session 13's H200 audit measured
// after each problem's first draw, over the 128 problems under protocol 1, whose draw is today's
// (TF32 and float64 forwards, no sensitivity runs): median measured / estimate 0.97, 2 of 128
// more than 1.5x above it (docs/results/cpu-2026-12-05-s17). The inputs alone (below) were 1.37x
// under the measure at the median and up to 379x: a convolution whose outputs are 8x its inputs
// and a matmul of small K ran out of device memory beside others on a first draw reserved that
// small, and a 17 GB pooling input had the device alone (137 GB) for a draw that needed 52 GB.
inline constexpr double kInputWorkingFactor = 3.0;
inline constexpr double kForwardPeakWorkingFactor = 2.0;
inline constexpr double kOutputWorkingFactor = 4.5;
// Without the forward's figures: drawing a case holds its draw and its shared block (2x the
// inputs), the float64 run their double (2x) and its intermediates (2x), and the candidate runs
// on the same inputs beside the reference's outputs: about 8x the inputs in all. On the H200
// with four evaluations side by side, two such problems at once ran the device out of memory
// (session 9, call 2).
inline constexpr double kWorkingFactor = 8.0;
// The state (parameters) weighs more: the reference's model, its float64 copy (2x), a redrawn
// state block and its float64 (3x), the candidate's own model: 2_ShallowWideMLP (8.6 GB of
// weights) had 68.7 GB in its reference process alone when it ran out (session 11).
inline constexpr double kStateWorkingFactor = 10.0;

// What the load tells of a problem's sizes (`loaded.sizes`); the forward's are 0 where unknown.
struct ProblemSizes {
  double input_bytes = 0;
  double state_bytes = 0;
  double output_bytes = 0;        // the float32 forward's outputs (meta)
  double forward_peak_bytes = 0;  // its live peak, outputs included (meta); 0: not known
};
double working_bytes_before_drawing(const ProblemSizes& sizes);
bool needs_device_alone(const ProblemSizes& sizes, double device_bytes, int evaluations_per_device);
// Whether one evaluation of the problem needs, before its first draw, at least what the
// evaluations on a device of `device_bytes` may reserve together (the memory ledger's capacity,
// kReservableShare): it then has the device's memory to itself, the device drained of the
// others first (the evaluator's reserve_device_memory says so in `evaluated_alone`).
bool needs_whole_ledger(const ProblemSizes& sizes, double device_bytes);

}  // namespace kbv::eval
