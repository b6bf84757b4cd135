#include "generate/backoff.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <string>

namespace kbv::generate {

bool retryable_status(long status) {
  return status == 408 || status == 409 || status == 425 || status == 429 ||
         (status >= 500 && status <= 599);
}

std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now,
    std::chrono::milliseconds cap) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front())))
    value.remove_prefix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
    value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(value.front()))) {
    // delta-seconds; some servers send a fraction ("0.5"), which RFC 9110 does not allow but
    // which means what it says.
    std::string text(value);
    size_t used = 0;
    double seconds = 0;
    try {
      seconds = std::stod(text, &used);
    } catch (...) {
      return std::nullopt;
    }
    if (used != text.size() || !std::isfinite(seconds) || seconds < 0) return std::nullopt;
    auto ms = std::chrono::milliseconds(static_cast<long long>(std::min(seconds, 1e9) * 1000));
    return std::min(ms, cap);
  }
  // IMF-fixdate, the form RFC 9110 requires senders to use.
  std::tm tm{};
  std::string text(value);
  const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!end || *end != '\0') return std::nullopt;
  auto when = std::chrono::system_clock::from_time_t(::timegm(&tm));
  auto delta = std::chrono::duration_cast<std::chrono::milliseconds>(when - now);
  return std::clamp(delta, std::chrono::milliseconds(0), cap);
}

std::chrono::milliseconds backoff_delay(const BackoffPolicy& policy, int attempt, double unit,
                                        std::optional<std::chrono::milliseconds> retry_after) {
  // base * 2^attempt without overflow: past 2^30 the cap has long been reached.
  double ceiling =
      static_cast<double>(policy.base.count()) * std::ldexp(1.0, std::min(attempt, 30));
  ceiling = std::min(ceiling, static_cast<double>(policy.cap.count()));
  auto wait =
      std::chrono::milliseconds(static_cast<long long>(std::clamp(unit, 0.0, 1.0) * ceiling));
  if (retry_after && *retry_after > wait) wait = *retry_after;
  return wait;
}

}  // namespace kbv::generate
