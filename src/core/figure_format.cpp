#include "core/figure_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace kbv {
namespace {

// "0.000580" -> "0.00058", "2.00" -> "2"; "5.80e-07" -> "5.8e-07".
std::string trim_zeros(std::string s) {
  const size_t e = s.find('e');
  std::string exponent = e == std::string::npos ? "" : s.substr(e);
  std::string mantissa = e == std::string::npos ? s : s.substr(0, e);
  if (mantissa.find('.') != std::string::npos) {
    while (mantissa.back() == '0') mantissa.pop_back();
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  return mantissa + exponent;
}

}  // namespace

std::string significant(double value, int digits, TrailingZeros zeros) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return "0";
  digits = std::clamp(digits, 1, 17);
  const double magnitude = std::fabs(value);
  // Round to the digits first, so that the exponent is the rounded value's (9.996 -> 10.0).
  const std::string scientific = fmt::format("{:.{}e}", magnitude, digits - 1);
  const int exponent = std::atoi(scientific.c_str() + scientific.find('e') + 1);
  std::string out;
  if (exponent < -6 || exponent >= 15) {
    out = scientific;
  } else if (exponent >= digits - 1) {
    out = fmt::format("{:.0f}", magnitude);  // whole: the digits need no decimals
  } else {
    out = fmt::format("{:.{}f}", std::strtod(scientific.c_str(), nullptr), digits - 1 - exponent);
  }
  if (zeros == TrailingZeros::Trim) out = trim_zeros(out);
  return value < 0 ? "-" + out : out;
}

std::string times(double value) { return significant(value) + "x"; }

}  // namespace kbv
