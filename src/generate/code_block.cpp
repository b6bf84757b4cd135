#include "generate/code_block.hpp"

#include <algorithm>
#include <cctype>

namespace kbv::generate {

std::string to_string(Extraction e) {
  switch (e) {
    case Extraction::Ok:
      return "ok";
    case Extraction::SeveralCodeBlocks:
      return "several_code_blocks";
    case Extraction::NoCodeBlock:
      return "no_code_block";
    case Extraction::UnterminatedCodeBlock:
      return "unterminated_code_block";
    case Extraction::Truncated:
      return "truncated";
  }
  return "unknown";
}

bool has_code(Extraction e) { return e != Extraction::NoCodeBlock; }

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

size_t leading_backticks(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && s[n] == '`') ++n;
  return n;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::vector<CodeBlock> code_blocks(std::string_view text) {
  std::vector<CodeBlock> blocks;
  bool inside = false;
  size_t fence = 0;  // the opening fence's length
  CodeBlock current;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view body = trim(line);
    size_t ticks = leading_backticks(body);
    if (!inside) {
      if (ticks >= 3) {
        std::string_view info = trim(body.substr(ticks));
        // A one-line block ("```x = 1```") is inline code in prose, not a candidate.
        if (info.find("```") == std::string_view::npos) {
          inside = true;
          fence = ticks;
          current = CodeBlock{};
          // The info string's first word is the language ("python title=x" -> "python").
          current.language = lower(info.substr(0, info.find_first_of(" \t{")));
        }
      }
    } else if (ticks >= fence && trim(body.substr(ticks)).empty()) {
      blocks.push_back(std::move(current));
      inside = false;
    } else if (body.size() > 3 && body.ends_with("```") && ticks == 0) {
      // "    return y```": the fence closes the block at the end of a code line.
      std::string_view code_part = line.substr(0, line.rfind("```"));
      current.code.append(code_part);
      current.code.push_back('\n');
      blocks.push_back(std::move(current));
      inside = false;
    } else {
      current.code.append(line);
      current.code.push_back('\n');
    }
    if (end == text.size()) break;
    pos = end + 1;
  }
  if (inside) {
    current.terminated = false;
    blocks.push_back(std::move(current));
  }
  return blocks;
}

Extracted extract_code(std::string_view text) {
  Extracted out;
  auto blocks = code_blocks(text);
  out.blocks = static_cast<int>(blocks.size());
  if (blocks.empty()) return out;
  // With several blocks the candidate is the first that defines ModelNew: a model that shows its
  // CUDA source in a ```cpp block before the Python module meant the Python one.
  int taken = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].code.find("class ModelNew") != std::string::npos) {
      taken = static_cast<int>(i);
      break;
    }
  }
  const auto& block = blocks[taken];
  // An empty fence pair holds no candidate: the sample fails like an answer without code.
  if (trim(block.code).empty()) return out;
  out.taken = taken;
  out.code = block.code;
  out.language = block.language;
  if (!block.terminated) {
    out.outcome = Extraction::UnterminatedCodeBlock;
  } else if (blocks.size() > 1) {
    out.outcome = Extraction::SeveralCodeBlocks;
  } else {
    out.outcome = Extraction::Ok;
  }
  return out;
}

}  // namespace kbv::generate
