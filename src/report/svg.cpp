#include "report/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kbv::report::svg {

namespace {

constexpr double kWidth = 440, kHeight = 300;
constexpr double kLeft = 56, kRight = 16, kTop = 16, kBottom = 44;
constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                    "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

const char* colour(int i) { return kPalette[static_cast<size_t>(i) % std::size(kPalette)]; }

// A linear map from [lo, hi] onto the pixels [p0, p1].
struct Scale {
  double lo, hi, p0, p1;
  double operator()(double v) const { return p0 + (v - lo) / (hi - lo) * (p1 - p0); }
};

std::string ratio_label(int power) {
  return power >= 0 ? fmt::format("{:g}x", std::ldexp(1.0, power))
                    : fmt::format("1/{:g}x", std::ldexp(1.0, -power));
}

// Integer log2 range covering the values and 1x, at least [-1, 1].
std::pair<int, int> log2_range(const std::vector<double>& values) {
  double lo = -1, hi = 1;
  for (double v : values) {
    lo = std::min(lo, std::floor(std::log2(v)));
    hi = std::max(hi, std::ceil(std::log2(v)));
  }
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

std::string open() {
  return fmt::format(
      "<svg viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\" "
      "font-size=\"11\" font-family=\"sans-serif\">\n",
      kWidth, kHeight);
}

std::string line(double x1, double y1, double x2, double y2, const char* style) {
  return fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" {}/>\n", x1, y1,
                     x2, y2, style);
}

std::string label(double x, double y, const std::string& s, const char* extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" {}>{}</text>\n", x, y, extra, escape(s));
}

// The frame, the axis titles, and log2 ticks on x (and on y when `y_log`).
std::string frame(const Scale& x, const Scale& y, bool x_log, bool y_log,
                  const std::string& x_title, const std::string& y_title) {
  std::string s = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft,
      kTop, kWidth - kLeft - kRight, kHeight - kTop - kBottom);
  // At most about 8 labels per axis; log ticks on multiples of the step, so 1x stays.
  const auto step = [](double lo, double hi, int most) {
    return std::max(1, static_cast<int>(std::ceil((hi - lo) / most)));
  };
  if (x_log) {
    const int x_step = step(x.lo, x.hi, 8);
    for (int k = static_cast<int>(x.lo); k <= static_cast<int>(x.hi); ++k) {
      if (k % x_step != 0) continue;
      s += label(x(k), kHeight - kBottom + 14, ratio_label(k), "text-anchor=\"middle\"");
    }
  }
  const int y_lo = static_cast<int>(std::ceil(y.lo)), y_hi = static_cast<int>(std::floor(y.hi));
  const int y_step = step(y.lo, y.hi, y_log ? 8 : 5);
  for (int k = y_lo; k <= y_hi; ++k) {
    if (k % y_step != 0) continue;
    s += label(kLeft - 4, y(k) + 4, y_log ? ratio_label(k) : std::to_string(k),
               "text-anchor=\"end\"");
  }
  s += label((kLeft + kWidth - kRight) / 2, kHeight - 8, x_title, "text-anchor=\"middle\"");
  s += fmt::format(
      "<text transform=\"translate(12 {:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      (kTop + kHeight - kBottom) / 2, escape(y_title));
  return s;
}

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string scatter(const std::vector<Point>& points, const std::vector<std::string>& series,
                    const std::string& x_label, const std::string& y_label) {
  std::vector<double> xs, ys;
  for (const auto& p : points) {
    xs.push_back(p.x);
    ys.push_back(p.y);
  }
  const auto [x_lo, x_hi] = log2_range(xs);
  const auto [y_lo, y_hi] = log2_range(ys);
  const Scale x{double(x_lo), double(x_hi), kLeft, kWidth - kRight};
  const Scale y{double(y_lo), double(y_hi), kHeight - kBottom, kTop};
  std::string s = open() + frame(x, y, true, true, x_label, y_label);
  s += line(x(0), kTop, x(0), kHeight - kBottom, "stroke=\"#bbb\" stroke-dasharray=\"4 3\"");
  s += line(kLeft, y(0), kWidth - kRight, y(0), "stroke=\"#bbb\" stroke-dasharray=\"4 3\"");
  for (const auto& p : points) {
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.75\">"
        "<title>{}</title></circle>\n",
        x(std::log2(p.x)), y(std::log2(p.y)), colour(p.series), escape(p.label));
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const double ly = kTop + 12 + 14 * double(i);
    s += fmt::format("<circle cx=\"{}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", kLeft + 10,
                     ly - 4, colour(static_cast<int>(i)));
    s += label(kLeft + 18, ly, series[i]);
  }
  if (points.empty()) {
    s += label(x(0), y(0) - 8, "no correct kernel with speedup and memory measured",
               "text-anchor=\"middle\" fill=\"#666\"");
  }
  return s + "</svg>\n";
}

std::string histogram(const std::vector<double>& values, const std::string& x_label) {
  const auto [lo, hi] = log2_range(values);
  const int bins = 2 * (hi - lo);
  std::vector<int> counts(static_cast<size_t>(bins), 0);
  for (double v : values) {
    const int b = static_cast<int>(std::floor((std::log2(v) - lo) * 2));
    ++counts[static_cast<size_t>(std::clamp(b, 0, bins - 1))];
  }
  const int top = std::max(1, *std::max_element(counts.begin(), counts.end()));
  const Scale x{double(lo), double(hi), kLeft, kWidth - kRight};
  const Scale y{0, double(top), kHeight - kBottom, kTop};
  std::string s = open() + frame(x, y, true, false, x_label, "kernels");
  for (int b = 0; b < bins; ++b) {
    if (counts[static_cast<size_t>(b)] == 0) continue;
    const double x0 = x(lo + b / 2.0), x1 = x(lo + (b + 1) / 2.0);
    const double y0 = y(counts[static_cast<size_t>(b)]);
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
        "<title>{}</title></rect>\n",
        x0 + 1, y0, x1 - x0 - 2, kHeight - kBottom - y0, colour(0), counts[static_cast<size_t>(b)]);
  }
  s += line(x(0), kTop, x(0), kHeight - kBottom, "stroke=\"#d62728\" stroke-dasharray=\"4 3\"");
  if (values.empty()) {
    s += label(x(0), kTop + 40, "no correct timed kernel", "text-anchor=\"middle\" fill=\"#666\"");
  }
  return s + "</svg>\n";
}

std::string bars(const std::vector<std::string>& categories, const std::vector<std::string>& series,
                 const std::vector<std::vector<double>>& values) {
  const Scale y{0, 1, kHeight - kBottom, kTop};
  std::string s = open();
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", kLeft,
      kTop, kWidth - kLeft - kRight, kHeight - kTop - kBottom);
  for (int k = 0; k <= 4; ++k) {
    s += label(kLeft - 4, y(k / 4.0) + 4, fmt::format("{}%", 25 * k), "text-anchor=\"end\"");
  }
  const double slot = (kWidth - kLeft - kRight) / double(std::max<size_t>(1, categories.size()));
  const double bar = (slot - 12) / double(std::max<size_t>(1, series.size()));
  for (size_t c = 0; c < categories.size(); ++c) {
    const double x0 = kLeft + slot * double(c) + 6;
    for (size_t i = 0; i < series.size() && i < values[c].size(); ++i) {
      const double v = std::clamp(values[c][i], 0.0, 1.0);
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}: {:.1f}%</title></rect>\n",
          x0 + bar * double(i), y(v), bar - 1, y(0) - y(v), colour(static_cast<int>(i)),
          escape(series[i]), 100 * v);
    }
    s += label(x0 + (slot - 12) / 2, kHeight - kBottom + 14, categories[c],
               "text-anchor=\"middle\"");
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const double lx = kLeft + 8 + 110 * double(i);
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>\n", lx,
                     kHeight - 20, colour(static_cast<int>(i)));
    s += label(lx + 14, kHeight - 11, series[i]);
  }
  return s + "</svg>\n";
}

}  // namespace kbv::report::svg
