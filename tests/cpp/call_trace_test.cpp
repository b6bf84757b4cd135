#include "orchestrate/call_trace.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kbv::orchestrate {
namespace {

std::vector<nlohmann::json> read_lines(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(CallTrace, WritesOneLinePerCallOnlyWhileTheVariableNamesAFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("kbv_call_trace_" + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(path);
  const auto started = std::chrono::system_clock::now();

  ::unsetenv("KBV_TRACE_CALLS");
  trace_call("reference", 42, "prepare_case", started, 0.5, "ok");
  EXPECT_FALSE(std::filesystem::exists(path));

  ::setenv("KBV_TRACE_CALLS", path.c_str(), 1);
  trace_call("reference", 42, "prepare_case", started, 0.5, "ok");
  trace_call("candidate", 43, "forward", started, 1.25, "timeout", {{"inputs", 0.25}});
  trace_call("reference", 44, "load_problem", started, 3.0, "ok", nullptr, "19_ReLU.py");
  ::unsetenv("KBV_TRACE_CALLS");
  trace_call("candidate", 43, "forward", started, 2.0, "ok");

  auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["role"], "reference");
  EXPECT_EQ(lines[0]["cmd"], "prepare_case");
  EXPECT_DOUBLE_EQ(lines[0]["s"].get<double>(), 0.5);
  EXPECT_EQ(lines[1]["status"], "timeout");
  EXPECT_EQ(lines[1]["pid"], 43);
  EXPECT_FALSE(lines[0].contains("detail"));
  EXPECT_FALSE(lines[0].contains("file"));
  EXPECT_EQ(lines[2]["file"], "19_ReLU.py");  // a load names its problem
  EXPECT_DOUBLE_EQ(lines[1]["detail"]["inputs"].get<double>(), 0.25);
  EXPECT_NEAR(lines[1]["t"].get<double>(),
              std::chrono::duration<double>(started.time_since_epoch()).count(), 1e-3);
  std::filesystem::remove(path);
}

TEST(CallTrace, AnUnwritableFileChangesNothing) {
  ::setenv("KBV_TRACE_CALLS", "/nonexistent-dir/trace.jsonl", 1);
  EXPECT_NO_THROW(trace_call("reference", 1, "ping", std::chrono::system_clock::now(), 0.0, "ok"));
  ::unsetenv("KBV_TRACE_CALLS");
}

}  // namespace
}  // namespace kbv::orchestrate
