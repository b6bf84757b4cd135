// `kbv report --format md`: the Report as Markdown tables.
#include <fmt/format.h>

#include "report/formats.hpp"
#include "report/tables.hpp"

namespace kbv::report {

using namespace tables;

std::string markdown_report(const Report& r, GroupBy by) {
  std::string out = "# kbv report\n\n";
  out += fmt::format("{} results", r.results);
  if (!r.sections.empty()) {
    out += ", protocols:";
    for (const auto& s : r.sections) out += " `" + s.protocol + "`";
  }
  out += fmt::format(
      ". Rates are over every task of the group (failures included) unless the "
      "column says otherwise; intervals are {:g}% bootstrap intervals over tasks; "
      "see docs/reporting.md.\n\n",
      100 * r.options.confidence);
  if (!r.harness_errors.empty()) out += harness_errors_note(r.harness_errors) + "\n\n";
  if (!r.flagged.empty()) {
    out += flagged_headline(r.flagged.size(), r.options.include_flagged) + "\n\n";
  }
  if (r.sections.empty()) out += "No results.\n\n";
  for (const auto& s : r.sections) {
    out += fmt::format("## Protocol `{}`\n\n", s.protocol);
    for (bool best : {false, true}) {
      const auto rows = rows_of(s, by, best);
      if (rows.empty()) continue;
      if (best) out += "### Best of N samples per problem (best correct speedup vs TF32)\n\n";
      out += "Correctness\n\n" + markdown(correctness(rows, group_name(by)));
      out += "Speedup vs TF32\n\n" + markdown(speed(rows, group_name(by), true, r.options.fast_p));
      out += "Speedup vs FP32\n\n" + markdown(speed(rows, group_name(by), false, r.options.fast_p));
      out += "Memory (correct kernels)\n\n" +
             markdown(memory(rows, group_name(by), r.options.memory_noise_band));
    }
  }
  if (r.protocols) {
    out += fmt::format("## Protocols side by side ({} candidates evaluated under every one)\n\n",
                       r.protocols->common_candidates);
    out += markdown(protocols(*r.protocols));
    out += "Candidates correct under one protocol but not another\n\n" +
           markdown(disagreement(*r.protocols));
  }
  out += "## Flagged problems\n\n";
  if (r.flagged.empty()) {
    out +=
        "None: no problem is flagged degenerate or with a reference failing its float64 run.\n\n";
  } else {
    out +=
        "`problem_degenerate`: the output does not depend on the inputs; "
        "`reference_fails_float64`: the TF32 reference is far from its own float64 run. A flag "
        "about a problem holds for every candidate of it.\n\n";
    out +=
        markdown(flagged(r)) + flagged_note(r.flagged.size(), r.options.include_flagged) + "\n\n";
  }
  if (!r.harness_errors.empty()) {
    out += "## Harness errors (faults of kbv, left out of every figure)\n\n" +
           markdown(harness_errors(r.harness_errors));
  }
  return out;
}

}  // namespace kbv::report
