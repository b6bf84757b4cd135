#include "generate/provider.hpp"

namespace kbv::generate {

namespace {

using nlohmann::json;

json parse_object(const std::string& body) {
  auto answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object()) {
    throw MalformedAnswer("the answer is not a JSON object (" + std::to_string(body.size()) +
                          " bytes)");
  }
  return answer;
}

class OpenAi final : public Provider {
 public:
  explicit OpenAi(std::string base) : base_(std::move(base)) {}
  std::string api() const override { return "openai"; }

  HttpRequest request(const std::string& prompt, const ModelParams& params,
                      const std::string& key) const override {
    json body = {{"model", params.model},
                 {"messages", json::array({{{"role", "user"}, {"content", prompt}}})},
                 {"max_tokens", params.max_tokens}};
    if (params.temperature) body["temperature"] = *params.temperature;
    HttpRequest r{base_ + "/chat/completions", {"Content-Type: application/json"}, body.dump()};
    if (!key.empty()) r.headers.push_back("Authorization: Bearer " + key);
    return r;
  }

  Completion parse(const std::string& body) const override {
    auto answer = parse_object(body);
    const auto& choices = answer.value("choices", json::array());
    if (!choices.is_array() || choices.empty() || !choices[0].is_object()) {
      throw MalformedAnswer("the answer has no choices");
    }
    const auto& choice = choices[0];
    Completion c;
    const auto& message = choice.value("message", json::object());
    if (message.is_object() && message.contains("content")) {
      const auto& content = message["content"];
      if (content.is_string()) {
        c.text = content.get<std::string>();
      } else if (content.is_array()) {  // content parts, as some servers send them
        for (const auto& part : content) {
          if (part.is_object() && part.value("type", "") == "text")
            c.text += part.value("text", "");
        }
      }
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      c.finish_reason = choice["finish_reason"].get<std::string>();
    c.truncated = c.finish_reason == "length";
    c.usage = answer.value("usage", json());
    return c;
  }

 private:
  std::string base_;
};

class Anthropic final : public Provider {
 public:
  explicit Anthropic(std::string base) : base_(std::move(base)) {}
  std::string api() const override { return "anthropic"; }

  HttpRequest request(const std::string& prompt, const ModelParams& params,
                      const std::string& key) const override {
    json body = {{"model", params.model},
                 {"max_tokens", params.max_tokens},
                 {"messages", json::array({{{"role", "user"}, {"content", prompt}}})}};
    if (params.temperature) body["temperature"] = *params.temperature;
    HttpRequest r{base_ + "/messages",
                  {"Content-Type: application/json", "anthropic-version: 2023-06-01"},
                  body.dump()};
    if (!key.empty()) r.headers.push_back("x-api-key: " + key);
    return r;
  }

  Completion parse(const std::string& body) const override {
    auto answer = parse_object(body);
    if (!answer.contains("content") || !answer["content"].is_array()) {
      throw MalformedAnswer("the answer has no content array");
    }
    Completion c;
    // Only text blocks: thinking blocks are the model's scratchpad, not its answer.
    for (const auto& block : answer["content"]) {
      if (block.is_object() && block.value("type", "") == "text") c.text += block.value("text", "");
    }
    if (answer.contains("stop_reason") && answer["stop_reason"].is_string())
      c.finish_reason = answer["stop_reason"].get<std::string>();
    c.truncated = c.finish_reason == "max_tokens";
    c.usage = answer.value("usage", json());
    return c;
  }

 private:
  std::string base_;
};

}  // namespace

std::unique_ptr<Provider> make_provider(const std::string& api, std::string base_url) {
  while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
  if (api == "openai") return std::make_unique<OpenAi>(std::move(base_url));
  if (api == "anthropic") return std::make_unique<Anthropic>(std::move(base_url));
  throw std::invalid_argument("unknown API '" + api + "': openai or anthropic");
}

std::string default_base_url(const std::string& api) {
  return api == "anthropic" ? "https://api.anthropic.com/v1" : "https://api.openai.com/v1";
}

std::vector<std::string> key_variables(const std::string& api) {
  return {"KBV_API_KEY", api == "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY"};
}

}  // namespace kbv::generate
