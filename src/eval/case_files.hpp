// Where a case's tensors live while it is judged: today safetensors files. The reference wrote
// each case's golden outputs (TF32, FP32 and the float64 truth) into its run directory; the
// candidate's worker writes its outputs into the candidate's own folder, and this process reads
// them there, outside the sandbox. Everything that touches those files is here, so the judges
// (judge/case_judge.hpp) see tensor views only.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/protocol.hpp"
#include "judge/case_judge.hpp"
#include "judge/findings.hpp"
#include "tensor/safetensors.hpp"

namespace kbv::eval {

class CaseFiles {
 public:
  explicit CaseFiles(std::filesystem::path candidate_dir) : dir_(std::move(candidate_dir)) {}

  // Where the candidate saves its outputs of case `c` (`tag` for a re-check's run).
  std::filesystem::path output_of(const nlohmann::json& c, const std::string& tag = "") const;
  // Where it saves the last output of timing set `index`.
  std::filesystem::path timed_output(size_t index) const;

  // The most output a candidate may return for these cases: twice the golden file (which holds
  // the TF32, FP32 and float64 outputs), at least 64 MiB. Larger returns are refused by the
  // worker before any copy, so a multi-GB output costs only its own result.
  static unsigned long long output_limit(const std::vector<const nlohmann::json*>& cases);

  // A candidate's output file. Its worker wrote a valid file, but the candidate's own threads
  // may rewrite it or swap it for a link meanwhile: a link is not followed, and a file that no
  // longer reads is the candidate's doing (output_file_tampered, a reject), never a crash of
  // kbv. nullopt, with `why`, when it cannot be read.
  static std::optional<tensor::SafetensorsFile> open_output(const std::filesystem::path& file,
                                                            std::string& why,
                                                            judge::Findings& findings);

  // Every output in `output` against case `c`'s golden outputs.
  static judge::OutputsJudgement judge(const nlohmann::json& c, const std::filesystem::path& output,
                                       const Protocol& protocol, judge::Findings& findings);

  // The two output files hold the same bytes (determinism is recorded, not required).
  static bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b,
                         judge::Findings& findings);

 private:
  std::filesystem::path dir_;
};

}  // namespace kbv::eval
