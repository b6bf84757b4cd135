// The service's one credential: a bearer token read from a file (never from the command line,
// where every user of the machine can read it in /proc), compared in constant time.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kbv::serve {

// The token in `path`, surrounding whitespace removed (an editor's trailing newline is not part
// of it). Throws eval::UsageError when the file is missing, unreadable or holds no token: a
// service that would accept any request must not start.
std::string read_token_file(const std::filesystem::path& path);

// Whether `presented` is `expected`, in time independent of where they differ and of the
// presented token's length: both are hashed and the digests compared with CRYPTO_memcmp, so a
// client cannot learn the token a byte at a time from response times.
bool tokens_equal(std::string_view expected, std::string_view presented);

// The token of an `Authorization: Bearer <token>` header value; nullopt for another scheme or
// none. The scheme is case-insensitive (RFC 7235).
std::optional<std::string> bearer_token(std::string_view authorization);

// Whether the Authorization header value carries the expected token.
bool authorized(std::string_view expected, std::string_view authorization);

}  // namespace kbv::serve
