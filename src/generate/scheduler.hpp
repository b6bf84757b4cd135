// Sending one prompt until it is answered: the per-run cap on requests per minute, and the retry
// policy (429 and 5xx with backoff and jitter after Retry-After, a bounded number of timeouts,
// bodies cut short or unreadable retried like a 5xx). The transport and the sleep are passed in,
// so the policy is unit-tested without a server or a clock.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <random>
#include <string>

#include "generate/backoff.hpp"
#include "generate/http.hpp"
#include "generate/provider.hpp"

namespace kbv::generate {

// Requests spaced at least 60/rpm seconds apart across every thread of the run (a smooth cap,
// not a burst per minute: a provider's per-minute limit then never sees more than rpm in any
// window). rpm <= 0: no cap.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(double rpm) : rpm_(rpm) {}
  // The time at which the caller may send (now or later); reserves that slot.
  Clock::time_point reserve(Clock::time_point now);
  // reserve() and sleep until the slot.
  void acquire();

 private:
  double rpm_;
  std::mutex mutex_;
  Clock::time_point next_{};
};

struct RetryPolicy {
  BackoffPolicy backoff;
  int max_retries = 6;      // retries of 429, 5xx and transport failures (cut bodies included)
  int timeout_retries = 2;  // retries of a request that ran past its timeout
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

using Transport = std::function<HttpResponse(const HttpRequest&, std::chrono::milliseconds)>;
using Sleeper = std::function<void(std::chrono::milliseconds)>;

struct Exchange {
  bool answered = false;  // a completion was parsed
  Completion completion;
  int attempts = 0;  // requests sent
  int timeouts = 0;
  double latency_s = 0;  // of the request that was answered (or the last one)
  long last_status = 0;
  bool auth_failed = false;          // 401 or 403: the run should stop, every request would fail
  std::string error;                 // why not answered (for the ledger; never holds the key)
  std::vector<std::string> retried;  // one line per retry, e.g. "HTTP 429, waited 1.2 s"
};

struct ExchangeContext {
  const Provider& provider;
  const RetryPolicy& policy;
  RateLimiter& limiter;
  Transport transport;
  Sleeper sleep;
  std::function<double()> unit;             // uniform in [0, 1), for the jitter
  const std::atomic<bool>* stop = nullptr;  // set: no new attempt starts
};

Exchange exchange(const ExchangeContext& context, const HttpRequest& request);

}  // namespace kbv::generate
