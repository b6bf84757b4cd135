#include "generate/http.hpp"

#include <curl/curl.h>

#include <cctype>
#include <mutex>
#include <stdexcept>

namespace kbv::generate {

namespace {

size_t on_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  std::string line(data, size * count);
  auto* response = static_cast<HttpResponse*>(user);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name == "retry-after") {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
        value.pop_back();
      response->retry_after = value;
    }
  } else if (line.starts_with("HTTP/")) {
    response->retry_after.reset();  // a new response (after a 100 Continue): its own headers
  }
  return size * count;
}

}  // namespace

void http_global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("curl_global_init failed");
  });
}

HttpResponse http_post(const HttpRequest& request, std::chrono::milliseconds timeout) {
  http_global_init();
  HttpResponse response;
  CURL* curl = curl_easy_init();
  if (!curl) {
    response.transport_error = "curl_easy_init failed";
    return response;
  }
  curl_slist* headers = nullptr;
  for (const auto& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<long long>(timeout.count(), 30000)));
  // Threads: no signals for timeouts (libcurl's documented requirement for multithreaded use).
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");  // whatever this libcurl decodes
  // Proxies from the environment (https_proxy, no_proxy) apply as libcurl reads them; redirects
  // are not followed: an API that redirects a POST is misconfigured, and the key must not go
  // to another host.
  auto start = std::chrono::steady_clock::now();
  CURLcode code = curl_easy_perform(curl);
  response.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  if (code != CURLE_OK) {
    response.timed_out = code == CURLE_OPERATION_TIMEDOUT;
    response.transport_error = *error ? error : curl_easy_strerror(code);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return response;
}

}  // namespace kbv::generate
