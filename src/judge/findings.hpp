// The flags an evaluation collects, in the order found: one per id, its first evidence kept (the
// rule of core/result.hpp's add_flag), except that evidence which makes a flag a reject replaces a
// warning of the same id (a thread left running is a warning until an output is seen to change
// after it finished).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace kbv::judge {

class Findings {
 public:
  // Every id must be in the flag catalogue (core/flags.hpp), with a severity it may carry.
  void add(std::string id, Severity severity, std::string detail);
  // add(), or a reject replacing an earlier warning or info of the same id.
  void raise(std::string id, Severity severity, std::string detail);
  bool has(std::string_view id) const;
  bool has_reject() const;
  const std::vector<Flag>& flags() const { return flags_; }
  // Appended to the result's flags (Result::add_flag: one per id there too).
  void into(Result& result) const;

 private:
  std::vector<Flag> flags_;
};

}  // namespace kbv::judge
