// When to send a request again: which failures are worth retrying, how long to wait (exponential
// backoff with full jitter, never shorter than the server's Retry-After), and the server's
// Retry-After itself. Pure functions; the scheduler (generate/scheduler.hpp) sleeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kbv::generate {

// 408 (request timeout), 409 (conflict: some gateways' "try again"), 425, 429 (rate limited)
// and every 5xx. Other 4xx are the request's own fault (a bad model name, a bad key): a retry
// gets the same answer.
bool retryable_status(long status);

// Retry-After: delta-seconds ("120", fractional accepted) or an HTTP-date ("Wed, 21 Oct 2015
// 07:28:00 GMT") relative to `now`; nullopt when absent or unreadable. A date in the past is 0.
// Capped at `cap` so that a hostile or broken server cannot park the run for days.
std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now,
    std::chrono::milliseconds cap = std::chrono::minutes(10));

struct BackoffPolicy {
  std::chrono::milliseconds base{1000};  // the first retry waits up to this
  std::chrono::milliseconds cap{60000};  // no exponential wait is longer
};

// The wait before retry number `attempt` (0 for the first retry): a uniform draw in
// [0, min(cap, base * 2^attempt)] ("full jitter": concurrent clients that failed together do not
// retry together), raised to the server's Retry-After when it asked for longer. `unit` is a
// uniform draw in [0, 1) supplied by the caller, so the function stays deterministic to test.
std::chrono::milliseconds backoff_delay(const BackoffPolicy& policy, int attempt, double unit,
                                        std::optional<std::chrono::milliseconds> retry_after);

}  // namespace kbv::generate
