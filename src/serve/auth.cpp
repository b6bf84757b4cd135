#include "serve/auth.hpp"

#include <openssl/crypto.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "core/hash.hpp"
#include "eval/eval_request.hpp"

namespace kbv::serve {

namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

}  // namespace

std::string read_token_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw eval::UsageError("--token-file " + path.string() +
                           " cannot be read: kbv serve needs a token to check requests against");
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string token(trimmed(text.str()));
  if (token.empty()) {
    throw eval::UsageError("--token-file " + path.string() +
                           " is empty: kbv serve needs a token to check requests against");
  }
  return token;
}

bool tokens_equal(std::string_view expected, std::string_view presented) {
  // Digests of equal length whatever the lengths of the tokens; the expected token is never
  // empty (read_token_file), so an empty presented one cannot match by accident.
  const std::string a = sha256_hex(expected);
  const std::string b = sha256_hex(presented);
  return !expected.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::optional<std::string> bearer_token(std::string_view authorization) {
  authorization = trimmed(authorization);
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size()) return std::nullopt;
  for (size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i])
      return std::nullopt;
  }
  if (authorization[scheme.size()] != ' ') return std::nullopt;
  auto token = trimmed(authorization.substr(scheme.size() + 1));
  if (token.empty()) return std::nullopt;
  return std::string(token);
}

bool authorized(std::string_view expected, std::string_view authorization) {
  auto token = bearer_token(authorization);
  return token && tokens_equal(expected, *token);
}

}  // namespace kbv::serve
