// `kbv audit --problems DIR` (issue 18, point 6): every problem's reference evaluated as its own
// candidate through the whole pipeline (draws, truth, re-checks, traces, timing against itself,
// memory), the checks that must fire on a copy of the reference (PyTorch doing the main work) as
// information only. It is `kbv run` over generated candidates (the problem's own file with
// `ModelNew = Model`), so it resumes like one, and its table is report/audit_table.
#pragma once

#include <filesystem>

#include "schedule/suite.hpp"

namespace kbv::schedule {

// Writes the reference-as-candidate file of every problem of `problems` under
// `folder/reference/level<L>/<name>.py` (the plain layout `kbv run` pairs by name) and returns
// `folder`; files already there with the same content are left as they are.
std::filesystem::path write_self_candidates(const std::filesystem::path& problems,
                                            const std::filesystem::path& folder);

// The suite run of the audit: `request.candidates` is ignored (the self-candidates are written
// under the cache folder), and the settings are marked `audit`.
SuiteSummary run_audit(SuiteRequest request);

}  // namespace kbv::schedule
