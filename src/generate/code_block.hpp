// Code-block extraction from a model's answer. The answer is free text in which the candidate is
// expected as one fenced (```) block; what was found is recorded as an outcome, so that a sample
// without code is a failed sample in every report rather than a file that is silently missing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kbv::generate {

enum class Extraction {
  Ok,                     // exactly one complete block
  SeveralCodeBlocks,      // more than one: the first that defines ModelNew (else the first) taken
  NoCodeBlock,            // no fence at all (or an empty answer)
  UnterminatedCodeBlock,  // a fence opened and never closed: the rest of the answer taken
  Truncated,              // the provider stopped at the token limit (set by the caller)
};

std::string to_string(Extraction e);

// Whether a sample with this outcome has a candidate file of real code. NoCodeBlock does not: its
// file is a stub that fails at import (generate/layout.hpp), so reports count it as failed.
bool has_code(Extraction e);

struct CodeBlock {
  std::string language;  // the fence's info string ("python", "cpp", ""), lower case
  std::string code;      // without the fences
  bool terminated = true;
};

struct Extracted {
  Extraction outcome = Extraction::NoCodeBlock;
  std::string code;      // empty for NoCodeBlock
  int blocks = 0;        // every block found, an unterminated last one included
  int taken = -1;        // index of the block taken, -1 when none
  std::string language;  // of the block taken
};

// Every fenced block, in order. Fences are lines whose first non-blank characters are three or
// more backticks; the closing fence is at least as long as the opening one. A block closed by a
// fence at the end of a code line ("return y```"), as some models write, is accepted too.
std::vector<CodeBlock> code_blocks(std::string_view text);

// The candidate in an answer (outcomes above; Truncated is never returned here).
Extracted extract_code(std::string_view text);

}  // namespace kbv::generate
