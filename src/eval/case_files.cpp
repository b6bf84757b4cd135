#include "eval/case_files.hpp"

#include <fmt/format.h>

#include <cstring>

namespace kbv::eval {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path CaseFiles::output_of(const json& c, const std::string& tag) const {
  const std::string id = c["id"].get<std::string>();
  return dir_ / "candidate" / ((tag.empty() ? id : id + "-" + tag) + ".safetensors");
}

fs::path CaseFiles::timed_output(size_t index) const {
  return dir_ / "candidate" / fmt::format("timed-{}.safetensors", index);
}

unsigned long long CaseFiles::output_limit(const std::vector<const json*>& cases) {
  unsigned long long largest = 0;
  std::error_code ec;
  for (const auto* c : cases) {
    if (!c) continue;
    auto size = fs::file_size((*c)["golden"].get<std::string>(), ec);
    if (!ec) largest = std::max<unsigned long long>(largest, size);
  }
  return std::max(64ULL << 20, 2 * largest);
}

std::optional<tensor::SafetensorsFile> CaseFiles::open_output(const fs::path& file,
                                                              std::string& why,
                                                              judge::Findings& findings) {
  try {
    return tensor::SafetensorsFile::open(file, /*follow_links=*/false);
  } catch (const std::exception& error) {
    // The message may quote the file's bytes: only printable ASCII of it is kept.
    std::string detail = error.what();
    for (char& ch : detail) {
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
    }
    why = fmt::format("the output file {} no longer reads as kbv's worker wrote it: {}",
                      file.filename().string(), detail);
    findings.add("output_file_tampered", Severity::Reject, why);
    return std::nullopt;
  }
}

judge::OutputsJudgement CaseFiles::judge(const json& c, const fs::path& output,
                                         const Protocol& protocol, judge::Findings& findings) {
  judge::OutputsJudgement judged;
  if (!fs::exists(fs::symlink_status(output))) {
    judged.reason = "no output was saved";
    return judged;
  }
  auto opened = open_output(output, judged.reason, findings);
  if (!opened) return judged;
  auto golden = tensor::SafetensorsFile::open(c["golden"].get<std::string>());
  return judge::judge_outputs([&](std::string_view name) { return opened->find(name); },
                              [&](std::string_view name) { return golden.find(name); },
                              c["outputs"].get<int>(), protocol.reference_variant, protocol.policy);
}

bool CaseFiles::same_bytes(const fs::path& a, const fs::path& b, judge::Findings& findings) {
  std::string unreadable;
  auto opened_a = open_output(a, unreadable, findings);
  auto opened_b = open_output(b, unreadable, findings);
  if (!opened_a || !opened_b) return false;
  const auto& fa = opened_a->tensors();
  const auto& fb = opened_b->tensors();
  if (fa.size() != fb.size()) return false;
  for (size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].nbytes != fb[i].nbytes || std::memcmp(fa[i].data, fb[i].data, fa[i].nbytes) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace kbv::eval
