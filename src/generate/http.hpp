// One HTTP POST through libcurl. Each call uses its own easy handle, so concurrent requests from
// the scheduler's threads share nothing; curl_global_init is done once by http_global_init().
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "generate/provider.hpp"

namespace kbv::generate {

struct HttpResponse {
  long status = 0;  // 0 when no answer came (transport failure)
  std::string body;
  std::optional<std::string> retry_after;  // the Retry-After header's value
  bool timed_out = false;                  // the whole request took longer than its timeout
  std::string transport_error;  // curl's message for a failed transfer (a body cut short, a
                                // refused connection); empty when the transfer completed
  double seconds = 0;
};

void http_global_init();

HttpResponse http_post(const HttpRequest& request, std::chrono::milliseconds timeout);

}  // namespace kbv::generate
