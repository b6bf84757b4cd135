// A worker process (`python -m kbv.worker`) and the private channel to it: JSON lines over two
// pipes on fds 3 and 4, so nothing the hosted code prints on stdout can pass for a message.
// Stdout and stderr go to a log file whose tail explains crashes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "orchestrate/fd_passing.hpp"
#include "orchestrate/sandbox.hpp"
#include "orchestrate/scratch_quota.hpp"
#include "orchestrate/worker_protocol.hpp"

namespace kbv::orchestrate {

struct WorkerOptions {
  WorkerRole role = WorkerRole::Candidate;  // which commands it serves (worker_protocol.hpp)
  std::string python;
  std::string pythonpath;
  std::filesystem::path working_directory;
  std::filesystem::path log_file;
  std::map<std::string, std::string> environment;  // added to the orchestrator's own
  SandboxOptions sandbox;
  // Added to the orchestrator's niceness for the worker and everything it starts (0: the same).
  // Build-ahead workers run at a positive value so compilers never take CPU from the
  // evaluations, and above all from a timing run, beside them.
  int nice = 0;
  // RLIMIT_AS of the worker (0: none). A test and operations knob for the reference worker
  // (KBV_REFERENCE_ADDRESS_SPACE_BYTES): kbv's own allocation budget, so a reference that runs
  // out of it is a harness fault (out_of_memory), never the candidate's.
  unsigned long long address_space_bytes = 0;
};

struct Response {
  enum class Status { Ok, Error, Timeout, Died };
  Status status = Status::Died;
  nlohmann::json result;   // Ok
  std::string error_kind;  // Error: the worker's classification
  std::string message;     // Error, Timeout, Died: one sentence
  std::string detail;      // traceback, compiler output, or the log's tail
  FdSet fds;               // Ok: descriptors the answer came with (shared blocks)
  // Error: the resource the worker saw fail under the error ("disk_full", "out_of_memory"), from
  // the exception's type and errno (python/kbv/worker.py). Trusted only from the reference: the
  // candidate's process can write anything on its own channel (judge/harness_fault.hpp).
  std::string resource;
  // Error with resource "out_of_memory": which memory ran out, "device" or "host".
  std::string memory;
  // Error with resource "out_of_memory", from the reference: what it held then, in words (its
  // cases, models and shared blocks; torch's allocator; the device's free memory).
  std::string holding;
  // Died: the worker sent a line that is not a message (rather than exiting or closing).
  bool malformed = false;
  // Died (malformed too): a well-formed answer that names another request than the one in
  // flight, or none (every request carries a `seq` its answer echoes): a line forged on the
  // channel, or the worker's own answer after a forged one was taken for it.
  bool forged = false;
  bool ok() const { return status == Status::Ok; }
};

class WorkerProcess {
 public:
  explicit WorkerProcess(const WorkerOptions& options);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends one request, with descriptors when given (they go first, on the descriptor socket,
  // and the request says how many); the answer is read by receive(). Lets the caller overlap
  // two workers. Throws std::logic_error for a command the worker's role does not serve (kbv's
  // own bug). A worker that does not take the descriptors is reported by receive() as having
  // died (its channel is closed).
  void send(const nlohmann::json& request, const FdSet& fds = {});
  Response receive(std::chrono::milliseconds timeout);
  Response call(const nlohmann::json& request, std::chrono::milliseconds timeout,
                const FdSet& fds = {}) {
    send(request, fds);
    return receive(timeout);
  }

  // True when an answer (or the end of the channel) is waiting; waits at most `wait`. Lets one
  // thread watch several workers without giving up on any of them.
  bool ready(std::chrono::milliseconds wait);

  // What the sandbox achieved in the child (its first line on the channel), with
  // `scratch_quota` as enforced: the sandbox's tmpfs, else this side's watchdog.
  const nlohmann::json& isolation() const { return isolation_; }
  // Asks the worker to exit, then kills its whole process group if it does not. A worker that
  // exited when asked has its channel read to the end: a line nobody asked for is forged.
  void stop();
  // The first line on the channel that was not the worker's answer to the request in flight (an
  // answer out of turn, or a line after the last answer asked for), described; once stop() has
  // run, the whole channel has been seen.
  const std::optional<std::string>& forged() const { return forged_; }
  pid_t pid() const { return pid_; }
  std::string log_tail(size_t bytes = 3000) const;

 private:
  std::optional<std::string> read_line(std::chrono::steady_clock::time_point deadline);
  Response died(std::string what);
  void kill_group();
  // The scratch quota (scratch_quota.hpp): checked while any worker of this thread is waited
  // on; once exceeded, the worker's group is killed and its next answer is the error
  // `scratch_quota_exceeded`.
  void check_quota();
  Response quota_exceeded();
  Response receive_answer(std::chrono::milliseconds timeout);

  // The request in flight, for the call trace (call_trace.hpp).
  std::string traced_command_;
  std::string traced_file_;  // a load's problem or candidate file name
  std::chrono::system_clock::time_point traced_sent_;
  std::chrono::steady_clock::time_point traced_sent_steady_;

  WorkerOptions options_;
  pid_t pid_ = -1;
  pid_t group_ = -1;  // the worker's process group, which outlives the worker itself
  int to_worker_ = -1;
  int from_worker_ = -1;
  int fd_socket_ = -1;  // SOCK_SEQPACKET: descriptors both ways (the worker's fd 5)
  std::optional<std::string> send_failure_;
  std::string buffer_;
  nlohmann::json isolation_ = nlohmann::json::object();
  bool exited_ = false;
  int wait_status_ = 0;
  bool overlong_ = false;        // a line longer than kMaxMessageBytes arrived: a malformed message
  std::uint64_t seq_ = 0;        // the last request's number; its answer must echo it
  std::uint64_t answered_ = 0;   // the last request whose answer was read
  std::string pending_command_;  // the last request's command
  std::optional<std::string> forged_;
  bool stopped_ = false;
  static constexpr size_t kMaxMessageBytes = 64u << 20;
  std::optional<ScratchQuotaWatch> quota_;
  std::optional<std::string> quota_failure_;
};

// The interpreter and import path workers run with: next to the kbv executable when installed,
// the build tree's when run from a build, overridable with KBV_PYTHON and KBV_PYTHONPATH.
std::string locate_python();
std::string locate_pythonpath();

}  // namespace kbv::orchestrate
