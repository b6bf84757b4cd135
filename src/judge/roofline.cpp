#include "judge/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/figure_format.hpp"

namespace kbv::judge {
using nlohmann::json;

json DevicePeaks::to_json() const {
  return {{"bytes_per_s", bytes_per_s}, {"flops_per_s", flops_per_s}, {"source", source}};
}

std::optional<DevicePeaks> documented_peaks(const std::string& name) {
  struct Known {
    const char* match;
    double bytes_per_s;
    double flops_per_s;
    const char* source;
  };
  // NVIDIA data sheets: HBM bandwidth and dense (not 2:4 sparse) FP16/BF16 tensor-core TFLOPS.
  static const Known known[] = {
      {"H200", 4.8e12, 989.4e12, "documented: H200 SXM, 4.8 TB/s HBM3e, 989 dense FP16 TFLOPS"},
      {"H100 PCIe", 2.0e12, 756.0e12, "documented: H100 PCIe, 2.0 TB/s, 756 dense FP16 TFLOPS"},
      {"H100", 3.35e12, 989.4e12, "documented: H100 SXM, 3.35 TB/s, 989 dense FP16 TFLOPS"},
      {"A100", 2.039e12, 312.0e12, "documented: A100 80GB SXM, 2.0 TB/s, 312 dense FP16 TFLOPS"},
  };
  for (const auto& k : known) {
    if (name.find(k.match) != std::string::npos) {
      return DevicePeaks{k.bytes_per_s, k.flops_per_s, k.source};
    }
  }
  return std::nullopt;
}

DevicePeaks from_measured(double copy_bytes_per_s, double matmul_flops_per_s) {
  return {copy_bytes_per_s * kMeasuredHeadroom, matmul_flops_per_s * kMeasuredHeadroom,
          "measured (copy, FP16 matmul) x 1.5"};
}

json RooflineCheck::to_json() const {
  return {{"bytes", bytes},       {"memory_floor_ms", memory_ms}, {"compute_floor_ms", compute_ms},
          {"floor_ms", floor_ms}, {"threshold_ms", threshold_ms}, {"candidate_ms", candidate_ms},
          {"below", below}};
}

RooflineCheck assess_roofline(const ReferenceCost& cost, const DevicePeaks& peaks,
                              double candidate_ms, double safety) {
  RooflineCheck r;
  r.bytes = std::max(0.0, cost.bytes_read) + std::max(0.0, cost.bytes_written - cost.l2_bytes);
  r.memory_ms = peaks.bytes_per_s > 0 ? 1e3 * r.bytes / peaks.bytes_per_s : 0.0;
  r.compute_ms = peaks.flops_per_s > 0 ? 1e3 * std::max(0.0, cost.flops) / peaks.flops_per_s : 0.0;
  r.floor_ms = std::max(r.memory_ms, r.compute_ms);
  r.threshold_ms = safety * r.floor_ms;
  r.candidate_ms = candidate_ms;
  r.below = r.threshold_ms > 0 && candidate_ms < r.threshold_ms;
  return r;
}

void judge_roofline(const RooflineCheck& check, const ReferenceCost& cost, const DevicePeaks& peaks,
                    Findings& out) {
  if (!check.below) return;
  out.add("below_roofline", Severity::Reject,
          fmt::format("median time {} ms is below {} x the roofline floor {} ms: {:.4g} "
                      "bytes at {:.3g} B/s = {} ms, {:.4g} FLOPs at {:.3g} FLOP/s = {} ms ({})",
                      significant(check.candidate_ms, 4), kRooflineSafety,
                      significant(check.floor_ms, 4), check.bytes, peaks.bytes_per_s,
                      significant(check.memory_ms, 4), cost.flops, peaks.flops_per_s,
                      significant(check.compute_ms, 4), peaks.source));
}

}  // namespace kbv::judge
