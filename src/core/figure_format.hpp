// The one way kbv prints a figure meant for a reader (a speedup, a ratio, a time): significant
// digits rather than a fixed number of decimals, so that a candidate 1,700x slower than its
// baseline reads 0.000588x and not 0.00x (issue 19). Machine-readable outputs (JSON, CSV) keep
// their full numbers.
#pragma once

#include <string>

namespace kbv {

enum class TrailingZeros { Keep, Trim };

// `value` with `digits` significant digits (1 to 17), in fixed notation: "0.000588", "1.31",
// "19.2", "2.00" (Keep) or "2" (Trim). A value that needs no decimals for that many digits is
// printed whole, never rounded to its digits ("1700", "19235"). Scientific notation only below
// 1e-6 or from 1e15 up ("5.88e-07"); 0 is "0"; NaN and infinities are "nan", "inf", "-inf".
std::string significant(double value, int digits = 3, TrailingZeros zeros = TrailingZeros::Keep);

// A speedup or another ratio as the reports and summaries print it: significant(value) + "x".
std::string times(double value);

}  // namespace kbv
