// The catalogue of flag ids: every finding kbv can record about a candidate or a problem, with
// the severities it may carry and one line of meaning. It is the single list: Result::add_flag
// refuses an id that is not here, docs/result.md's flag table is checked against it by a test
// (tests/cpp/flags_test.cpp), and the static scan's ids (python/kbv/scan*.py) by another
// (tests/python/test_worker_protocol.py).
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "core/result.hpp"

namespace kbv {

struct FlagInfo {
  std::string_view id;
  // The severities this id may carry. Most have one; `background_thread` is a reject or a warning
  // by its evidence, and the library findings are warnings under the published protocols.
  Severity severity;
  std::optional<Severity> also;
  std::string_view meaning;

  bool allows(Severity s) const { return s == severity || (also && s == *also); }
};

std::span<const FlagInfo> flag_catalogue();
const FlagInfo* find_flag(std::string_view id);
// Throws std::logic_error when `id` is not catalogued or may not carry `severity`: kbv's own
// bug, since the flag would reach users' reports undocumented.
void require_catalogued(std::string_view id, Severity severity);

}  // namespace kbv
