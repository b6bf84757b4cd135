#include "generate/scheduler.hpp"

#include <fmt/format.h>

#include <thread>

namespace kbv::generate {

RateLimiter::Clock::time_point RateLimiter::reserve(Clock::time_point now) {
  if (rpm_ <= 0) return now;
  auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(60.0 / rpm_));
  std::lock_guard lock(mutex_);
  auto slot = std::max(now, next_);
  next_ = slot + interval;
  return slot;
}

void RateLimiter::acquire() {
  auto slot = reserve(Clock::now());
  std::this_thread::sleep_until(slot);
}

namespace {

std::string excerpt(const std::string& body) {
  constexpr size_t kMax = 300;
  std::string text = body.size() > kMax ? body.substr(0, kMax) + "..." : body;
  for (auto& ch : text) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  return text;
}

}  // namespace

Exchange exchange(const ExchangeContext& context, const HttpRequest& request) {
  Exchange ex;
  int retries = 0;
  for (;;) {
    if (context.stop && context.stop->load()) {
      if (ex.error.empty()) ex.error = "the run stopped before this request was answered";
      return ex;
    }
    context.limiter.acquire();
    HttpResponse response = context.transport(request, context.policy.timeout);
    ++ex.attempts;
    ex.latency_s = response.seconds;
    ex.last_status = response.status;
    std::optional<std::chrono::milliseconds> retry_after;
    std::string why;
    bool timeout = false;
    if (response.timed_out) {
      timeout = true;
      ++ex.timeouts;
      why = fmt::format("timed out after {:.1f} s", response.seconds);
    } else if (!response.transport_error.empty()) {
      // A refused connection, a reset, a body shorter than its Content-Length.
      why = fmt::format("transfer failed{}: {}",
                        response.status ? fmt::format(" (HTTP {})", response.status) : "",
                        response.transport_error);
    } else if (response.status >= 200 && response.status < 300) {
      try {
        ex.completion = context.provider.parse(response.body);
        ex.answered = true;
        ex.error.clear();
        return ex;
      } catch (const MalformedAnswer& error) {
        why = fmt::format("HTTP {} with an unreadable answer: {}", response.status, error.what());
      }
    } else if (retryable_status(response.status)) {
      if (response.retry_after) {
        retry_after = parse_retry_after(*response.retry_after, std::chrono::system_clock::now());
      }
      why = fmt::format("HTTP {}: {}", response.status, excerpt(response.body));
    } else {
      ex.auth_failed = response.status == 401 || response.status == 403;
      ex.error = fmt::format("HTTP {} (not retried): {}", response.status, excerpt(response.body));
      return ex;
    }
    ex.error = why;
    if (timeout ? ex.timeouts > context.policy.timeout_retries
                : ++retries > context.policy.max_retries) {
      ex.error = fmt::format("gave up after {} attempt{}: {}", ex.attempts,
                             ex.attempts == 1 ? "" : "s", why);
      return ex;
    }
    auto wait = backoff_delay(context.policy.backoff, ex.attempts - 1, context.unit(), retry_after);
    ex.retried.push_back(fmt::format("{}; waited {:.1f} s", why, wait.count() / 1000.0));
    context.sleep(wait);
  }
}

}  // namespace kbv::generate
