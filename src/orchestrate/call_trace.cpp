#include "orchestrate/call_trace.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace kbv::orchestrate {

std::string call_trace_path() {
  // Read at every call (microseconds beside a worker's milliseconds) so a test or a long-lived
  // process can turn it on and off.
  const char* value = std::getenv("KBV_TRACE_CALLS");
  return value == nullptr ? std::string() : std::string(value);
}

void trace_call(std::string_view role, int pid, std::string_view command,
                std::chrono::system_clock::time_point started, double seconds,
                std::string_view status, const nlohmann::json& detail, std::string_view file) {
  const std::string path = call_trace_path();
  if (path.empty()) return;
  const double t = std::chrono::duration<double>(started.time_since_epoch()).count();
  nlohmann::json line = {{"t", t},     {"s", seconds},   {"role", role},
                         {"pid", pid}, {"cmd", command}, {"status", status}};
  if (!detail.is_null()) line["detail"] = detail;
  if (!file.empty()) line["file"] = file;
  const std::string text = line.dump() + "\n";
  // Opened per line: tracing is a diagnosis aid, and this keeps it free of shared state.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;  // a trace that cannot be written must not change the evaluation
  [[maybe_unused]] auto written = ::write(fd, text.data(), text.size());
  ::close(fd);
}

void trace_wait(int pid, std::string_view what, std::chrono::system_clock::time_point started,
                double seconds, const nlohmann::json& detail) {
  if (seconds < kTracedWaitS) return;
  trace_call("harness", pid, what, started, seconds, "ok", detail);
}

}  // namespace kbv::orchestrate
