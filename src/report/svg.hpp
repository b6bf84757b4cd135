// The HTML report's plots: small inline SVG (no xmlns, no scripts, no external references),
// log2 axes for ratios, one <svg> element per plot.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kbv::report::svg {

struct Point {
  double x = 0, y = 0;  // positive ratios (log2 axes)
  int series = 0;       // colour index
  std::string label;    // the point's <title> (hover text)
};

// x against y on log2 axes with the 1x lines; `series` names the colours' legend.
std::string scatter(const std::vector<Point>& points, const std::vector<std::string>& series,
                    const std::string& x_label, const std::string& y_label);

// Counts of positive ratios in log2 bins of width 1/2, with the 1x line.
std::string histogram(const std::vector<double>& values, const std::string& x_label);

// Grouped bars in [0, 1]: for each category (x), one bar per series.
std::string bars(const std::vector<std::string>& categories, const std::vector<std::string>& series,
                 const std::vector<std::vector<double>>& values /* [category][series] */);

// Escapes &, <, >, " and ' for HTML text and attributes.
std::string escape(const std::string& text);

}  // namespace kbv::report::svg
