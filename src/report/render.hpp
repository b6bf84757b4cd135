// `kbv report`'s renderings of a Report: Markdown tables, CSV (one row per group, every figure),
// the Report's JSON, and a self-contained HTML page (inline CSS and SVG, no network).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "report/metrics.hpp"

namespace kbv::report {

enum class Format { Markdown, Json, Csv, Html };
// Which groups the Markdown and HTML tables list (the overall row always comes last). The
// results carry no model field: `model` is the run (the run or model folder). CSV and JSON
// always hold every grouping.
enum class GroupBy { Run, Level };

// "md"/"markdown", "json", "csv", "html"; nullopt for anything else.
std::optional<Format> parse_format(std::string_view name);
// "run", "model" (= run), "level"; nullopt for anything else.
std::optional<GroupBy> parse_group_by(std::string_view name);

std::string render(const Report& report, Format format, GroupBy by = GroupBy::Run);

}  // namespace kbv::report
