// The roofline floor (issue 3): no implementation of a problem can take less time than moving
// its compulsory bytes at the device's memory bandwidth, or doing the reference's FLOPs at the
// device's fastest legitimate tensor-core rate. A timed result below that floor (times a safety
// factor) is not a fast kernel; it is work that was skipped or escaped the timer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "judge/findings.hpp"

namespace kbv::judge {

// Results below kRooflineSafety x floor are rejected: the floor is a lower bound built from
// peak figures no kernel reaches, and the factor absorbs what the byte count cannot know
// (an input element a clever kernel provably need not read, clock boosts above the figures).
inline constexpr double kRooflineSafety = 0.8;

struct DevicePeaks {
  double bytes_per_s = 0;  // DRAM bandwidth
  double flops_per_s = 0;  // dense FP16/BF16 tensor-core rate (the fastest precision that can
                           // still pass the accuracy budget; TF32 and FP32 are slower)
  std::string source;      // "documented: ..." or "measured x headroom"
  nlohmann::json to_json() const;
};

// Published peaks of known devices, matched on the CUDA device name (e.g. "NVIDIA H200").
std::optional<DevicePeaks> documented_peaks(const std::string& device_name);

// Peaks measured in the reference worker (a large copy, a large FP16 matmul), raised by
// `headroom`: a measurement under load or below boost clock underestimates the peak, and an
// underestimated peak would raise the floor.
inline constexpr double kMeasuredHeadroom = 1.5;
DevicePeaks from_measured(double copy_bytes_per_s, double matmul_flops_per_s);

struct ReferenceCost {
  double flops = 0;          // of the reference's forward (torch.utils.flop_counter)
  double bytes_read = 0;     // inputs and parameters, each once
  double bytes_written = 0;  // outputs, once
  double l2_bytes = 0;       // writes up to this size may stay in L2 past the end event
};

struct RooflineCheck {
  double bytes = 0;  // compulsory DRAM traffic: reads + writes beyond what L2 can hold
  double memory_ms = 0;
  double compute_ms = 0;
  double floor_ms = 0;      // max(memory_ms, compute_ms)
  double threshold_ms = 0;  // kRooflineSafety x floor_ms
  double candidate_ms = 0;
  bool below = false;
  nlohmann::json to_json() const;
};

RooflineCheck assess_roofline(const ReferenceCost& cost, const DevicePeaks& peaks,
                              double candidate_ms, double safety = kRooflineSafety);

// below_roofline (reject) with every figure as its evidence, when the check is below.
void judge_roofline(const RooflineCheck& check, const ReferenceCost& cost, const DevicePeaks& peaks,
                    Findings& out);

}  // namespace kbv::judge
