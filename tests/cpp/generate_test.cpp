// kbv generate's pure parts: code-block extraction, Retry-After and backoff, the retry policy over
// a scripted transport, the rate limiter, the resume ledger, prompt rendering and the providers'
// request and answer formats.
#include "generate/generate.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>

#include "generate/backoff.hpp"
#include "generate/code_block.hpp"
#include "generate/ledger.hpp"
#include "generate/prompt.hpp"
#include "generate/provider.hpp"
#include "generate/scheduler.hpp"

namespace fs = std::filesystem;
using namespace kbv::generate;
using namespace std::chrono_literals;

// ---- code blocks ----------------------------------------------------------------------------

TEST(GenerateCodeBlock, NoneIsNoCodeBlock) {
  auto e = extract_code("I cannot help with that.");
  EXPECT_EQ(e.outcome, Extraction::NoCodeBlock);
  EXPECT_EQ(e.blocks, 0);
  EXPECT_TRUE(e.code.empty());
  EXPECT_EQ(extract_code("").outcome, Extraction::NoCodeBlock);
  // Inline triple-backtick code in prose is not a block.
  EXPECT_EQ(extract_code("use ```x = 1``` here").outcome, Extraction::NoCodeBlock);
}

TEST(GenerateCodeBlock, OneBlockWithLanguageTag) {
  auto e = extract_code("Here:\n```python\nclass ModelNew:\n    pass\n```\nDone.");
  EXPECT_EQ(e.outcome, Extraction::Ok);
  EXPECT_EQ(e.language, "python");
  EXPECT_EQ(e.code, "class ModelNew:\n    pass\n");
}

TEST(GenerateCodeBlock, LanguageTagsAndBareFences) {
  EXPECT_EQ(extract_code("```\nx = 1\n```").code, "x = 1\n");
  EXPECT_EQ(extract_code("```Python\nx = 1\n```").language, "python");
  EXPECT_EQ(extract_code("```py title=\"a.py\"\nx = 1\n```").language, "py");
  EXPECT_EQ(extract_code("  ```cpp\nint x;\n  ```\n").code, "int x;\n");
  EXPECT_EQ(extract_code("```python\r\nx = 1\r\n```\r\n").code, "x = 1\n");
}

TEST(GenerateCodeBlock, TwoBlocksTakeTheOneDefiningModelNew) {
  auto e = extract_code(
      "```cpp\n__global__ void k() {}\n```\ntext\n```python\nclass ModelNew: ...\n```");
  EXPECT_EQ(e.outcome, Extraction::SeveralCodeBlocks);
  EXPECT_EQ(e.blocks, 2);
  EXPECT_EQ(e.taken, 1);
  EXPECT_EQ(e.code, "class ModelNew: ...\n");
  // Neither defines ModelNew: the first.
  auto first = extract_code("```python\na = 1\n```\n```python\nb = 2\n```");
  EXPECT_EQ(first.outcome, Extraction::SeveralCodeBlocks);
  EXPECT_EQ(first.taken, 0);
  EXPECT_EQ(first.code, "a = 1\n");
}

TEST(GenerateCodeBlock, UnterminatedFenceTakesTheRest) {
  auto e = extract_code("```python\nclass ModelNew:\n    def forward(self");
  EXPECT_EQ(e.outcome, Extraction::UnterminatedCodeBlock);
  EXPECT_EQ(e.code, "class ModelNew:\n    def forward(self\n");
}

TEST(GenerateCodeBlock, LongerFencesAndClosingOnACodeLine) {
  // A four-backtick block holds a three-backtick line (a docstring showing markdown).
  auto e = extract_code("````python\ns = '''\n```\n'''\n````\n");
  EXPECT_EQ(e.outcome, Extraction::Ok);
  EXPECT_EQ(e.code, "s = '''\n```\n'''\n");
  auto inline_close = extract_code("```python\nx = 1\ny = 2```\n");
  EXPECT_EQ(inline_close.outcome, Extraction::Ok);
  EXPECT_EQ(inline_close.code, "x = 1\ny = 2\n");
}

TEST(GenerateCodeBlock, EmptyBlockIsNoCode) {
  EXPECT_EQ(extract_code("```python\n\n```").outcome, Extraction::NoCodeBlock);
}

// ---- backoff and Retry-After ------------------------------------------------------------------

TEST(GenerateBackoff, RetryableStatuses) {
  for (long s : {408L, 429L, 500L, 502L, 503L, 529L}) EXPECT_TRUE(retryable_status(s)) << s;
  for (long s : {200L, 400L, 401L, 403L, 404L, 422L}) EXPECT_FALSE(retryable_status(s)) << s;
}

TEST(GenerateBackoff, RetryAfterSecondsAndDates) {
  auto now = std::chrono::system_clock::from_time_t(1445412480);  // Wed, 21 Oct 2015 07:28:00 GMT
  EXPECT_EQ(parse_retry_after("120", now), 120000ms);
  EXPECT_EQ(parse_retry_after(" 0.5 ", now), 500ms);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now), 30000ms);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now), 0ms);  // in the past
  EXPECT_EQ(parse_retry_after("99999999", now),
            std::chrono::milliseconds(std::chrono::minutes(10)));
  EXPECT_FALSE(parse_retry_after("", now));
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("12abc", now));
  EXPECT_FALSE(parse_retry_after("-3", now));
}

TEST(GenerateBackoff, ExponentialWithJitterCapAndRetryAfter) {
  BackoffPolicy p{1000ms, 8000ms};
  EXPECT_EQ(backoff_delay(p, 0, 0.999999, std::nullopt).count(), 999);
  EXPECT_EQ(backoff_delay(p, 2, 0.5, std::nullopt), 2000ms);
  EXPECT_EQ(backoff_delay(p, 10, 0.5, std::nullopt), 4000ms);  // capped at 8 s, half of it
  EXPECT_EQ(backoff_delay(p, 100, 1.0, std::nullopt), 8000ms);
  EXPECT_EQ(backoff_delay(p, 0, 0.0, std::nullopt), 0ms);
  EXPECT_EQ(backoff_delay(p, 0, 0.1, 3000ms), 3000ms);  // the server asked for longer
  EXPECT_EQ(backoff_delay(p, 3, 1.0, 10ms), 8000ms);
}

// ---- the retry policy over a scripted transport -----------------------------------------------

namespace {

struct Script {
  std::deque<HttpResponse> responses;
  std::vector<std::chrono::milliseconds> slept;
  int sent = 0;
};

HttpResponse ok_answer(const std::string& text) {
  HttpResponse r;
  r.status = 200;
  r.body =
      nlohmann::json({{"choices", {{{"message", {{"content", text}}}, {"finish_reason", "stop"}}}},
                      {"usage", {{"total_tokens", 7}}}})
          .dump();
  return r;
}

HttpResponse status(long code, std::optional<std::string> retry_after = std::nullopt) {
  HttpResponse r;
  r.status = code;
  r.body = "{\"error\": \"busy\"}";
  r.retry_after = retry_after;
  return r;
}

Exchange run_script(Script& script, RetryPolicy policy = {}) {
  auto provider = make_provider("openai", "http://x/v1");
  RateLimiter limiter(0);
  policy.backoff = {100ms, 1000ms};
  ExchangeContext context{*provider,
                          policy,
                          limiter,
                          [&](const HttpRequest&, std::chrono::milliseconds) {
                            ++script.sent;
                            auto r = script.responses.front();
                            script.responses.pop_front();
                            return r;
                          },
                          [&](std::chrono::milliseconds d) { script.slept.push_back(d); },
                          [] { return 0.5; }};
  return exchange(context, provider->request("p", {"m", std::nullopt, 8192}, ""));
}

}  // namespace

TEST(GenerateRetry, RetriesRateLimitsHonouringRetryAfter) {
  Script s;
  s.responses = {status(429, "2"), status(503), ok_answer("hi")};
  auto ex = run_script(s);
  ASSERT_TRUE(ex.answered);
  EXPECT_EQ(ex.completion.text, "hi");
  EXPECT_EQ(ex.attempts, 3);
  ASSERT_EQ(s.slept.size(), 2u);
  EXPECT_EQ(s.slept[0], 2000ms);  // Retry-After over the 50 ms of jitter
  EXPECT_EQ(s.slept[1], 100ms);   // second retry: 0.5 * 200 ms
}

TEST(GenerateRetry, GivesUpAfterMaxRetriesAndNeverRetriesA400) {
  Script s;
  for (int i = 0; i < 5; ++i) s.responses.push_back(status(500));
  RetryPolicy p;
  p.max_retries = 2;
  auto ex = run_script(s, p);
  EXPECT_FALSE(ex.answered);
  EXPECT_EQ(ex.attempts, 3);
  EXPECT_NE(ex.error.find("gave up after 3 attempts"), std::string::npos) << ex.error;

  Script bad;
  bad.responses = {status(400)};
  auto refused = run_script(bad);
  EXPECT_FALSE(refused.answered);
  EXPECT_EQ(refused.attempts, 1);
  EXPECT_FALSE(refused.auth_failed);
  Script auth;
  auth.responses = {status(401)};
  EXPECT_TRUE(run_script(auth).auth_failed);
}

TEST(GenerateRetry, TimeoutsHaveTheirOwnBound) {
  Script s;
  HttpResponse timeout;
  timeout.timed_out = true;
  timeout.transport_error = "Operation timed out";
  s.responses = {timeout, timeout, timeout, ok_answer("late")};
  RetryPolicy p;
  p.timeout_retries = 1;
  auto ex = run_script(s, p);
  EXPECT_FALSE(ex.answered);
  EXPECT_EQ(ex.attempts, 2);
  EXPECT_EQ(ex.timeouts, 2);
}

TEST(GenerateRetry, CutAndUnreadableBodiesAreRetried) {
  Script s;
  HttpResponse cut = ok_answer("partial");
  cut.transport_error = "transfer closed with 100 bytes remaining to read";
  HttpResponse html;
  html.status = 200;
  html.body = "<html>gateway</html>";
  s.responses = {cut, html, ok_answer("whole")};
  auto ex = run_script(s);
  ASSERT_TRUE(ex.answered);
  EXPECT_EQ(ex.completion.text, "whole");
  EXPECT_EQ(ex.retried.size(), 2u);
}

TEST(GenerateRetry, RateLimiterSpacesRequests) {
  RateLimiter limiter(120);  // one every 500 ms
  auto t0 = RateLimiter::Clock::now();
  EXPECT_EQ(limiter.reserve(t0), t0);
  EXPECT_EQ(limiter.reserve(t0), t0 + 500ms);
  EXPECT_EQ(limiter.reserve(t0 + 100ms), t0 + 1000ms);
  EXPECT_EQ(limiter.reserve(t0 + 5s), t0 + 5s);  // idle time is not banked
  RateLimiter none(0);
  EXPECT_EQ(none.reserve(t0), t0);
  EXPECT_EQ(none.reserve(t0), t0);
}

// ---- the ledger --------------------------------------------------------------------------------

namespace {
std::string row(int level, int id, int sample, const std::string& outcome) {
  return nlohmann::json(
             {{"level", level}, {"problem_id", id}, {"sample", sample}, {"outcome", outcome}})
             .dump() +
         "\n";
}
}  // namespace

TEST(GenerateLedger, FinalRowsAndRetriesOfFailedRequests) {
  auto state = parse_ledger(row(1, 3, 0, "ok") + row(1, 3, 1, "request_failed") +
                            row(1, 4, 0, "no_code_block") + "not json\n" +
                            row(1, 4, 1, "request_failed") + row(1, 4, 1, "truncated"));
  EXPECT_EQ(state.rows.size(), 5u);
  EXPECT_EQ(state.unreadable, 1);
  EXPECT_TRUE(state.final_rows.count({1, 3, 0}));
  EXPECT_FALSE(state.final_rows.count({1, 3, 1}));  // failed requests are asked again
  EXPECT_TRUE(state.final_rows.count({1, 4, 0}));   // no code is an outcome, not a failure
  EXPECT_TRUE(state.final_rows.count({1, 4, 1}));
}

TEST(GenerateLedger, PartialLastLineIsCutBeforeAppending) {
  auto dir = fs::temp_directory_path() / ("kbv-ledger-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto path = dir / "generations.jsonl";
  {
    std::ofstream out(path);
    out << row(1, 1, 0, "ok") << R"({"level": 1, "problem_id": 1, "sam)";
  }
  {
    Ledger ledger(path);
    EXPECT_TRUE(ledger.done({1, 1, 0}));
    EXPECT_FALSE(ledger.done({1, 1, 1}));
    ledger.append(nlohmann::json::parse(row(1, 1, 1, "ok")));
    EXPECT_TRUE(ledger.done({1, 1, 1}));
  }
  Ledger again(path);
  EXPECT_EQ(again.state().rows.size(), 2u);
  EXPECT_EQ(again.state().unreadable, 0);
  // One writer per folder.
  EXPECT_THROW(Ledger{path}, LedgerBusy);
  fs::remove_all(dir);
}

// ---- prompts, providers, files -----------------------------------------------------------------

TEST(GeneratePrompt, TemplatesFillEveryPlaceholderOrFail) {
  EXPECT_EQ(render_template("a {{x}} b {{y}}", {{"x", "1"}, {"y", "{{x}}"}}), "a 1 b {{x}}");
  EXPECT_THROW(render_template("{{missing}}", {}), std::runtime_error);
}

TEST(GeneratePrompt, BundledTemplatesRender) {
  const fs::path dir = fs::path(KBV_SOURCE_DIR) / "python/kbv/prompts";
  for (const auto& kind : prompt_kinds()) {
    auto set = load_prompt_set(dir, kind, "H200");
    auto prompt = render_prompt(set, "class Model: pass\n");
    EXPECT_NE(prompt.find("class Model: pass"), std::string::npos);
    EXPECT_NE(prompt.find("load_inline"), std::string::npos);
    EXPECT_NE(prompt.find("H200"), std::string::npos);
    EXPECT_EQ(prompt.find("{{"), std::string::npos);
    EXPECT_EQ(set.file_sha256.size(), 4u);
  }
  EXPECT_THROW(load_prompt_set(dir, "one-shot", "Z80"), std::runtime_error);
}

TEST(GenerateProvider, OpenAiAndAnthropicFormats) {
  auto openai = make_provider("openai", "http://h/v1/");
  auto r = openai->request("hello", {"m", 0.5, 100}, "sk-1");
  EXPECT_EQ(r.url, "http://h/v1/chat/completions");
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["messages"][0]["content"], "hello");
  EXPECT_EQ(body["max_tokens"], 100);
  EXPECT_NE(std::find(r.headers.begin(), r.headers.end(), "Authorization: Bearer sk-1"),
            r.headers.end());
  EXPECT_EQ(openai->request("x", {"m", std::nullopt, 8192}, "").headers.size(),
            1u);  // no key, no header
  auto c = openai->parse(R"({"choices":[{"message":{"content":"x"},"finish_reason":"length"}]})");
  EXPECT_TRUE(c.truncated);
  EXPECT_THROW(openai->parse("{\"choices\": []}"), MalformedAnswer);
  EXPECT_THROW(openai->parse("{\"choices\": [{\"mess"), MalformedAnswer);

  auto anthropic = make_provider("anthropic", "http://h/v1");
  auto a = anthropic->request("hello", {"claude", std::nullopt, 64}, "k");
  EXPECT_EQ(a.url, "http://h/v1/messages");
  EXPECT_FALSE(nlohmann::json::parse(a.body).contains("temperature"));
  EXPECT_NE(std::find(a.headers.begin(), a.headers.end(), "x-api-key: k"), a.headers.end());
  auto ac = anthropic->parse(
      R"({"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"stop_reason":"max_tokens","usage":{"output_tokens":3}})");
  EXPECT_EQ(ac.text, "ab");
  EXPECT_TRUE(ac.truncated);
  EXPECT_EQ(ac.usage["output_tokens"], 3);
}

TEST(GenerateLayout, FileNamesStubsAndRedaction) {
  EXPECT_EQ(kernel_file_name({2, 17, 3}), "level_2_problem_17_sample_3_kernel.py");
  auto stub = failed_sample_stub({1, 3, 0}, "no_code_block");
  EXPECT_NE(stub.find("raise RuntimeError"), std::string::npos);
  EXPECT_EQ(stub.find("ModelNew"), std::string::npos);
  EXPECT_EQ(redact("key sk-abc in sk-abc", "sk-abc"), "key [redacted] in [redacted]");
  EXPECT_EQ(redact("text", ""), "text");
}
