#include "report/render.hpp"

#include "report/formats.hpp"

namespace kbv::report {

std::optional<Format> parse_format(std::string_view name) {
  if (name == "md" || name == "markdown") return Format::Markdown;
  if (name == "json") return Format::Json;
  if (name == "csv") return Format::Csv;
  if (name == "html") return Format::Html;
  return std::nullopt;
}

std::optional<GroupBy> parse_group_by(std::string_view name) {
  if (name == "run" || name == "model") return GroupBy::Run;
  if (name == "level") return GroupBy::Level;
  return std::nullopt;
}

std::string render(const Report& report, Format format, GroupBy by) {
  switch (format) {
    case Format::Markdown:
      return markdown_report(report, by);
    case Format::Json:
      return report.to_json().dump(2) + "\n";
    case Format::Csv:
      return csv_report(report);
    case Format::Html:
      return html_report(report, by);
  }
  return "";
}

}  // namespace kbv::report
