// SHA-256 of files and strings (OpenSSL's EVP), for content keys that hostile input cannot
// collide: result keys in the store and the problem and candidate hashes results record.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kbv {

std::string sha256_hex(std::string_view bytes);
// Throws std::runtime_error when the file cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace kbv
