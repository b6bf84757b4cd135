// kbv audit's table: which kernels the reference's copy and the TF32 baseline launched a call.
// The same code on the same inputs launches the same kernels unless a library chose another
// plan in one of the two processes; the row says so only where both counts were measured.

#include "report/audit_table.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kbv::report {
namespace {

using nlohmann::json;

json kernel_audit(std::vector<int> kernels, bool available = true, const std::string& sha = "",
                  const std::string& top = "") {
  json audit = {{"available", available}, {"kernels", kernels}};
  if (!sha.empty()) audit["signature"] = {{"sha256", sha}, {"distinct", 1}, {"top", {top}}};
  return audit;
}

// A reference audited against itself: timed, with the kernel audit of both timed sides.
json audited(const std::string& name, const json& copy, const json& tf32, double self = 1.0) {
  json result = {{"verdict", "correct"},
                 {"reason", "matches the reference"},
                 {"_row", {{"level", 1}}},
                 {"problem", {{"name", name}}},
                 {"speedup", {{"vs_tf32", {{"value", self}, {"ci_low", self}, {"ci_high", self}}}}},
                 {"timing",
                  {{"candidate", {{"median_ms", 6.4}}},
                   {"baseline_tf32", {{"median_ms", 6.4 * self}}},
                   {"baseline_fp32", {{"median_ms", 28.3}}}}}};
  if (!copy.is_null()) result["timing"]["candidate"]["kernel_audit"] = copy;
  if (!tf32.is_null()) result["timing"]["baseline_tf32"]["kernel_audit"] = tf32;
  return result;
}

TEST(AuditTable, SaysWhereTheBaselineRanOtherKernelsThanTheCopy) {
  // Session 33's 57_conv_transposed_2D: 3,676 kernels a call in the TF32 baseline, 4 in the copy.
  const json differ = audited("57_conv_transposed_2D", kernel_audit({4, 4, 4, 4, 4}),
                              kernel_audit({3676, 3676, 3676, 3676, 3676}), 4.449);
  const AuditRow row = audit_row(differ);
  ASSERT_TRUE(row.copy_kernels && row.tf32_kernels);
  EXPECT_EQ(*row.copy_kernels, 4);
  EXPECT_EQ(*row.tf32_kernels, 3676);
  EXPECT_TRUE(row.plans_differ());

  const std::string md = render_audit({row}, Format::Markdown);
  EXPECT_NE(md.find("other plans: 4 kernels a call in the copy, 3676 in the TF32 baseline"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("1 where the TF32 baseline ran other kernels than the reference's copy"),
            std::string::npos)
      << md;
  const json as_json = json::parse(render_audit({row}, Format::Json));
  EXPECT_TRUE(as_json[0]["plans_differ"].get<bool>());
  EXPECT_EQ(as_json[0]["tf32_kernels_per_call"].get<double>(), 3676);
  const std::string csv = render_audit({row}, Format::Csv);
  EXPECT_NE(csv.find(",4,3676,"), std::string::npos) << csv;
}

TEST(AuditTable, TheSameKernelsOrAnUnmeasuredSideAreNoFinding) {
  // The honest case: the same plan on both sides (one call's count off the others is the
  // median's to ignore: a first call's one-time setup kernel, say).
  const AuditRow same =
      audit_row(audited("19_ReLU", kernel_audit({1, 1, 1, 2, 1}), kernel_audit({1, 1, 1, 1, 1})));
  EXPECT_FALSE(same.plans_differ());
  EXPECT_EQ(*same.copy_kernels, 1);
  // No kernel audit (a CPU run), or one that was unavailable: nothing claimed either way.
  const AuditRow cpu = audit_row(audited("19_ReLU", nullptr, nullptr));
  EXPECT_FALSE(cpu.copy_kernels || cpu.tf32_kernels);
  EXPECT_FALSE(cpu.plans_differ());
  const AuditRow unavailable =
      audit_row(audited("19_ReLU", kernel_audit({4}), kernel_audit({3676}, /*available=*/false)));
  EXPECT_FALSE(unavailable.tf32_kernels);
  EXPECT_FALSE(unavailable.plans_differ());
  const std::string md = render_audit({same, cpu, unavailable}, Format::Markdown);
  EXPECT_EQ(md.find("other plans"), std::string::npos) << md;
  EXPECT_NE(md.find("0 where the TF32 baseline ran other kernels"), std::string::npos) << md;
}

TEST(AuditTable, SaysWhereTheCopysPlansWereChosenUnderMemoryPressure) {
  // Session 13's 76_conv_standard_1D on the H200: the copy's one kernel against the baseline's
  // three, 0.68x; the copy's worker now says why (the flag plans_under_pressure, an info).
  json squeezed =
      audited("76_conv_standard_1D", kernel_audit({1, 1, 1}), kernel_audit({3, 3, 3}), 0.676);
  squeezed["flags"] = {
      {{"id", "plans_under_pressure"}, {"severity", "info"}, {"detail", "3.00 GiB ran out"}}};
  const AuditRow row = audit_row(squeezed);
  EXPECT_TRUE(row.copy_plans_squeezed);
  EXPECT_TRUE(row.flags.empty());  // an info: in the row's words, not its flag list
  const std::string md = render_audit({row}, Format::Markdown);
  EXPECT_NE(md.find("; the copy's plans chosen under memory pressure"), std::string::npos) << md;
  EXPECT_TRUE(json::parse(render_audit({row}, Format::Json))[0]["copy_plans_under_pressure"]);
  // The honest row says nothing of it.
  const AuditRow plain =
      audit_row(audited("19_ReLU", kernel_audit({1, 1, 1}), kernel_audit({1, 1, 1})));
  EXPECT_FALSE(plain.copy_plans_squeezed);
  EXPECT_EQ(render_audit({plain}, Format::Markdown).find("memory pressure"), std::string::npos);
}

TEST(AuditTable, TheSameCountOfOtherKernelsIsAnotherPlanToo) {
  // 58_conv_transposed_3D's kind of row: as many kernels a call on both sides, other ones.
  const AuditRow other = audit_row(audited(
      "58_conv_transposed_3D", kernel_audit({3, 3, 3}, true, "aaaa", "sm90_xmma_dgrad_tf32"),
      kernel_audit({3, 3, 3}, true, "bbbb", "implicit_convolve_sgemm"), 1.138));
  EXPECT_TRUE(other.plans_differ());
  const std::string md = render_audit({other}, Format::Markdown);
  EXPECT_NE(md.find("other kernels in the copy (sm90_xmma_dgrad_tf32) than in the TF32 baseline "
                    "(implicit_convolve_sgemm)"),
            std::string::npos)
      << md;
  // The same kernels by name: no finding; a side without a signature (recorded before it was
  // kept, or its first call's records incomplete) is compared by counts alone.
  EXPECT_FALSE(audit_row(audited("58_conv_transposed_3D", kernel_audit({3}, true, "aaaa", "k"),
                                 kernel_audit({3}, true, "aaaa", "k")))
                   .plans_differ());
  EXPECT_FALSE(audit_row(audited("58_conv_transposed_3D", kernel_audit({3}, true, "aaaa", "k"),
                                 kernel_audit({3})))
                   .plans_differ());
}

}  // namespace
}  // namespace kbv::report
