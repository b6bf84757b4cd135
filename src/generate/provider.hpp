// The model providers behind one interface: a provider turns a prompt into an HTTP request and
// an HTTP answer's body into a completion. Both are pure (no I/O), so each API's format is
// unit-tested without a server; the transport is generate/http.hpp.
//   openai:    POST {base}/chat/completions   (OpenAI, vLLM, SGLang, llama.cpp, LiteLLM, ...)
//   anthropic: POST {base}/messages           (x-api-key, anthropic-version)
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kbv::generate {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"; may hold the key: never log them
  std::string body;
};

struct ModelParams {
  std::string model;
  std::optional<double> temperature;  // unset: the provider's default
  int max_tokens = 8192;
};

struct Completion {
  std::string text;           // the answer's text (every text part, joined)
  std::string finish_reason;  // as the provider says it ("stop", "length", "end_turn", ...)
  bool truncated = false;     // stopped at the token limit
  nlohmann::json usage;       // the provider's usage object, as sent (null when absent)
};

// A body that is not the API's answer (a proxy's HTML page, JSON cut short): worth a retry.
struct MalformedAnswer : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string api() const = 0;
  // An empty key sends no authentication header (a local server without auth).
  virtual HttpRequest request(const std::string& prompt, const ModelParams& params,
                              const std::string& key) const = 0;
  // Throws MalformedAnswer.
  virtual Completion parse(const std::string& body) const = 0;
};

// `api` is "openai" or "anthropic"; a trailing slash of base_url is dropped.
std::unique_ptr<Provider> make_provider(const std::string& api, std::string base_url);

std::string default_base_url(const std::string& api);

// The environment variables the key is read from, in order: KBV_API_KEY, then the provider's
// usual one (OPENAI_API_KEY or ANTHROPIC_API_KEY).
std::vector<std::string> key_variables(const std::string& api);

}  // namespace kbv::generate
