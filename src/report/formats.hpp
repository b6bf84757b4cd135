// Internal to src/report: the writers `render(const Report&, ...)` dispatches to, one format per
// file (markdown.cpp, csv.cpp, html.cpp; JSON is the Report's own to_json()).
#pragma once

#include <string>

#include "report/metrics.hpp"
#include "report/render.hpp"

namespace kbv::report {

std::string markdown_report(const Report& report, GroupBy by);
std::string csv_report(const Report& report);
std::string html_report(const Report& report, GroupBy by);

}  // namespace kbv::report
