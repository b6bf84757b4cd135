// CallTrace: every exchange with a worker, one JSON line each, when KBV_TRACE_CALLS names a file.
//
// Where an evaluation's time goes is the question every harness-speed change starts from
// (docs/results/issue18-case-path-h200.md): the per-stage durations of a result say which stage
// was slow, not which call. With the variable set, each answered request is appended as
// {"t": start (s since the epoch), "s": duration, "role", "pid", "cmd", "status"} (and
// "detail": a breakdown the worker sent, such as a drawn case's `draw_phases_s`, or
// {"cached": true} for a case kept from before); a line is
// written whole in one write(2) on an O_APPEND file, so the threads and processes of one run
// (kbv run, its device threads, a second kbv) can share the file. A load (load_problem,
// load_candidate) gives its steps and `process_start`, what its worker's start (imports) took.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kbv::orchestrate {

// The file named by KBV_TRACE_CALLS; empty: tracing is off.
std::string call_trace_path();

// `file`: for a load, the problem's or candidate's file name (the line's "file"), which ties
// the worker's pid to a problem when reading a run's trace.
void trace_call(std::string_view role, int pid, std::string_view command,
                std::chrono::system_clock::time_point started, double seconds,
                std::string_view status, const nlohmann::json& detail = nullptr,
                std::string_view file = {});

// An evaluation's wait for its device (`wait_gate`, `wait_memory`, `wait_ahead`, `wait_load`:
// role "harness", under the pid of the reference worker it is for): while it waits no call of its
// is in flight, and the calls alone could not tell a waiting evaluation from a missing one.
// Waits under kTracedWaitS are left out (a shared gate is entered at every call).
inline constexpr double kTracedWaitS = 0.01;
void trace_wait(int pid, std::string_view what, std::chrono::system_clock::time_point started,
                double seconds, const nlohmann::json& detail = nullptr);

}  // namespace kbv::orchestrate
