#include "orchestrate/worker_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "orchestrate/call_trace.hpp"
#include "orchestrate/process_tree.hpp"
#include "orchestrate/worker_protocol.hpp"

extern char** environ;

namespace kbv::orchestrate {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The processes below `root`, held by pidfd as they are found: a number freed and given to a
// new process between the scan and the signal is never signalled (pidfd_open, Linux 5.3). A
// kernel without pidfds gives the numbers (-pid) to signal by number.
std::vector<int> hold_descendants(pid_t root) {
  std::vector<int> held;
  for (pid_t pid : process_tree(root)) {
    if (pid == root) continue;
    const long fd = ::syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
      held.push_back(static_cast<int>(fd));
    } else if (errno == ENOSYS) {
      held.push_back(-pid);
    }
    // ESRCH: it ended meanwhile.
  }
  return held;
}

void kill_held(std::vector<int>& held) {
  for (int h : held) {
    if (h >= 0) {
      (void)::syscall(SYS_pidfd_send_signal, h, SIGKILL, nullptr, 0);
      ::close(h);
    } else {
      ::kill(-h, SIGKILL);
    }
  }
  held.clear();
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("writing to a worker failed: ") + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) + " (SIG" + (name ? name : "?") + ", " +
           strsignal(sig) + ")";
  }
  return "stopped";
}

// The workers of this thread with a scratch quota: waiting on any of them (the reference
// included) checks them all, so a candidate's background writer is caught between its calls.
thread_local std::vector<WorkerProcess*> quota_watched;

bool executable(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0; }

fs::path own_directory() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

}  // namespace

std::string locate_python() {
  if (const char* env = std::getenv("KBV_PYTHON"); env && *env) return env;
  // An installed kbv sits in the same bin/ as the interpreter that installed it.
  for (const char* name : {"python3", "python"}) {
    auto candidate = own_directory() / name;
    if (executable(candidate)) return candidate.string();
  }
#ifdef KBV_BUILD_PYTHON
  if (executable(KBV_BUILD_PYTHON)) return KBV_BUILD_PYTHON;
#endif
  return "python3";
}

std::string locate_pythonpath() {
  if (const char* env = std::getenv("KBV_PYTHONPATH"); env && *env) return env;
#ifdef KBV_DEV_PYTHONPATH
  // Running from a build tree: the worker package is in the source tree, kbv_native here.
  std::string dev = KBV_DEV_PYTHONPATH;
  auto source = fs::path(dev.substr(0, dev.find(':')));
  auto build = fs::path(dev.substr(dev.find(':') + 1));
  if (fs::exists(source / "kbv" / "worker.py") && fs::is_directory(build)) return dev;
#endif
  return "";
}

WorkerProcess::WorkerProcess(const WorkerOptions& options) : options_(options) {
  int to[2], from[2], fds[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0 ||
      ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    // With errno, so a harness fault is classified by it (judge/harness_fault.hpp).
    throw std::system_error(errno, std::generic_category(), "cannot create a worker channel");
  }
  // Everything the child needs is prepared before fork.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    auto key = entry.substr(0, entry.find('='));
    if (key == "PYTHONPATH" || options.environment.count(key)) continue;
    env_strings.push_back(entry);
  }
  std::string pythonpath = options.pythonpath;
  if (const char* existing = std::getenv("PYTHONPATH"); existing && *existing) {
    pythonpath += (pythonpath.empty() ? "" : ":") + std::string(existing);
  }
  if (!pythonpath.empty()) env_strings.push_back("PYTHONPATH=" + pythonpath);
  for (const auto& [k, v] : options.environment) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings = {options.python,
                                          "-m",
                                          "kbv.worker",
                                          "--role",
                                          std::string(to_string(options.role)),
                                          "--in",
                                          "3",
                                          "--out",
                                          "4",
                                          "--fds",
                                          "5"};
  std::vector<char*> argv;
  for (auto& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string log = options.log_file.string();
  std::string cwd = options.working_directory.string();

  const pid_t orchestrator = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork failed");
  if (pid_ == 0) {
    die_with_parent(orchestrator);
    ::setsid();  // its own process group: a timeout kills everything it started
    // Lowering priority needs no privilege; a failure only leaves the inherited priority.
    if (options.nice != 0) (void)!::nice(options.nice);
    int in = ::fcntl(to[0], F_DUPFD_CLOEXEC, 10);
    int out = ::fcntl(from[1], F_DUPFD_CLOEXEC, 10);
    int descriptors = ::fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
    ::dup2(in, 3);
    ::dup2(out, 4);
    ::dup2(descriptors, 5);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    int logfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (logfd >= 0) {
      ::dup2(logfd, 1);
      ::dup2(logfd, 2);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) _exit(126);
    std::string report = apply_sandbox_in_child(options.sandbox);
    std::string line = "{\"sandbox\":" + report + "}\n";
    if (::write(4, line.data(), line.size()) < 0) _exit(125);
    if (options.address_space_bytes > 0) {
      rlimit limit{options.address_space_bytes, options.address_space_bytes};
      (void)::setrlimit(RLIMIT_AS, &limit);
    }
    environ = envp.data();
    ::execvp(argv[0], argv.data());
    std::string failed = std::string("{\"exec_failed\":\"") + std::strerror(errno) + "\"}\n";
    (void)!::write(4, failed.data(), failed.size());
    _exit(127);
  }
  group_ = pid_;
  ::close(to[0]);
  ::close(from[1]);
  ::close(fds[1]);
  to_worker_ = to[1];
  from_worker_ = from[0];
  fd_socket_ = fds[0];
  auto first = read_line(Clock::now() + std::chrono::seconds(60));
  if (!first) throw std::runtime_error("a worker process did not start (no sandbox report)");
  auto report = nlohmann::json::parse(*first, nullptr, false);
  if (report.contains("sandbox")) isolation_ = report["sandbox"];
  const auto& box = options.sandbox;
  if (box.quota_bytes > 0 && !box.quota_dir.empty()) {
    auto achieved = isolation_.value("scratch_quota", nlohmann::json::object());
    bool tmpfs = achieved.value("kind", "") == "tmpfs";
    quota_.emplace(box.quota_dir, box.quota_bytes, tmpfs);
    auto described = quota_->describe();
    if (!tmpfs) {
      described["why_not_tmpfs"] =
          box.enabled ? achieved.value("reason", "unknown") : "the sandbox is disabled";
    }
    isolation_["scratch_quota"] = described;
    quota_watched.push_back(this);
  }
}

WorkerProcess::~WorkerProcess() {
  stop();
  std::erase(quota_watched, this);
}

void WorkerProcess::check_quota() {
  if (!quota_ || quota_failure_ || exited_ || pid_ <= 0) return;
  quota_failure_ = quota_->check(pid_);
  if (!quota_failure_) return;
  // Everything below the worker first, found while its relay lives (kill_group's reason), then
  // the group; the worker itself is reaped when its answer is read (quota_exceeded).
  auto below = hold_descendants(pid_);
  if (group_ > 0) ::kill(-group_, SIGKILL);
  kill_held(below);
}

Response WorkerProcess::quota_exceeded() {
  kill_group();
  Response r;
  r.status = Response::Status::Error;
  r.error_kind = "scratch_quota_exceeded";
  r.message = *quota_failure_;
  r.detail = log_tail();
  return r;
}

void WorkerProcess::send(const nlohmann::json& request, const FdSet& fds) {
  require_served(options_.role, request);
  if (!call_trace_path().empty()) {
    traced_command_ = request.value("cmd", "");
    traced_file_.clear();
    if (traced_command_.starts_with("load_")) {  // a load names its problem or candidate
      const auto file = request.value("problem", request.value("candidate", std::string()));
      traced_file_ = fs::path(file).filename().string();
    }
    traced_sent_ = std::chrono::system_clock::now();
    traced_sent_steady_ = Clock::now();
  }
  // Numbered whether or not it can be delivered: an answer must name the request in flight.
  nlohmann::json message = request;
  message["seq"] = ++seq_;
  pending_command_ = request.value("cmd", "");
  if (exited_) return;
  // A worker that died leaves a closed pipe: ignore SIGPIPE and let receive() report it.
  ::signal(SIGPIPE, SIG_IGN);
  if (!fds.empty()) {
    message["fds"] = fds.size();
    try {
      send_fds(fd_socket_, fds.fds(), Clock::now() + std::chrono::seconds(30));
    } catch (const std::exception& error) {
      // A worker that stopped reading its descriptor socket cannot go on: ended, reported.
      send_failure_ = error.what();
      kill_group();
      return;
    }
  }
  try {
    write_all(to_worker_, message.dump() + "\n");
  } catch (const std::exception&) {
    // receive() reports the death with the exit status and the log.
  }
}

std::optional<std::string> WorkerProcess::read_line(Clock::time_point deadline) {
  while (true) {
    for (auto* worker : quota_watched) worker->check_quota();
    if (quota_failure_) return std::nullopt;
    auto newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{from_worker_, POLLIN, 0};
    long long wait = std::min<long long>(left.count(), 1000);
    if (!quota_watched.empty())
      wait = std::min<long long>(wait, ScratchQuotaWatch::kInterval.count());
    int ready = ::poll(&p, 1, static_cast<int>(wait));
    if (ready < 0 && errno != EINTR) return std::nullopt;
    if (ready <= 0) continue;
    char chunk[65536];
    ssize_t n = ::read(from_worker_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      exited_ = true;  // end of channel: the worker is gone
      return std::nullopt;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    if (buffer_.size() > kMaxMessageBytes && buffer_.find('\n') == std::string::npos) {
      // No answer is this long: a worker streaming junk must not exhaust kbv's own memory.
      overlong_ = true;
      return std::nullopt;
    }
  }
}

bool WorkerProcess::ready(std::chrono::milliseconds wait) {
  auto deadline = Clock::now() + wait;
  while (true) {
    for (auto* worker : quota_watched) worker->check_quota();
    if (quota_failure_ || exited_ || buffer_.find('\n') != std::string::npos) return true;
    auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    if (!quota_watched.empty()) left = std::min(left, ScratchQuotaWatch::kInterval);
    pollfd p{from_worker_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) > 0) return true;
    if (Clock::now() >= deadline) return false;
  }
}

Response WorkerProcess::receive(std::chrono::milliseconds timeout) {
  Response r = receive_answer(timeout);
  if (!call_trace_path().empty() && !traced_command_.empty()) {
    static constexpr const char* kStatus[] = {"ok", "error", "timeout", "died"};
    // A drawn case's phases; a case kept from before was not drawn (its figures carry the
    // phases of its first draw), so it says only that; a load's steps; a shared case, what the
    // reference held.
    nlohmann::json detail;
    if (r.ok() && r.result.is_object()) {
      if (r.result.value("cached", false)) {
        detail = {{"cached", true}};
      } else if (r.result.contains("draw_phases_s")) {
        detail = r.result["draw_phases_s"];
      } else if (r.result.contains("load_phases_s")) {  // a load's steps, its process's start
        detail = r.result["load_phases_s"];
      } else if (r.result.contains("store") && traced_command_ == cmd::kShareCase) {
        detail = {{"store", r.result["store"]}};
      }
    } else if (r.status == Response::Status::Error) {
      detail = {{"error", r.error_kind}};
    }
    trace_call(to_string(options_.role), pid_, traced_command_, traced_sent_,
               std::chrono::duration<double>(Clock::now() - traced_sent_steady_).count(),
               kStatus[static_cast<int>(r.status)], detail, traced_file_);
    traced_command_.clear();
  }
  return r;
}

Response WorkerProcess::receive_answer(std::chrono::milliseconds timeout) {
  if (quota_failure_) return quota_exceeded();
  if (send_failure_) {
    Response r = died("could not be sent what it was asked to use (" + *send_failure_ + ")");
    send_failure_.reset();
    return r;
  }
  if (exited_) return died("had already exited");
  auto line = read_line(Clock::now() + timeout);
  if (!line && overlong_) line = buffer_.substr(0, 500);  // reported below as malformed
  if (!line) {
    if (quota_failure_) return quota_exceeded();
    if (exited_) return died("closed its channel");
    kill_group();
    Response r;
    r.status = Response::Status::Timeout;
    r.message = "did not answer within " + std::to_string(timeout.count() / 1000.0) + " s";
    r.detail = log_tail();
    return r;
  }
  auto message = nlohmann::json::parse(*line, nullptr, false);
  Response r;
  // A message of the wrong shape is as malformed as one that does not parse: reading it must not
  // throw inside kbv (a fault of the channel, not of kbv's code).
  const bool shaped =
      !overlong_ && message.is_object() && message.contains("ok") && message["ok"].is_boolean() &&
      (message["ok"].get<bool>() || (message.contains("error") && message["error"].is_object()));
  if (!shaped) {
    kill_group();
    r.status = Response::Status::Died;
    r.message = "sent a malformed message on its channel";
    r.malformed = true;
    r.detail = line->substr(0, 500);
    buffer_.clear();
    return r;
  }
  // The answer must name the request in flight: a line forged on the channel (by the hosted
  // code, or a process it started) names another, or none, or is followed by the worker's own.
  const auto seq = message.find("seq");
  if (seq == message.end() || !seq->is_number_unsigned() || seq->get<std::uint64_t>() != seq_) {
    if (!forged_) {
      forged_ = fmt::format(
          "an answer naming request {} arrived while request {} ({}) was in flight",
          seq == message.end() ? std::string("none") : seq->dump(), seq_, pending_command_);
    }
    kill_group();
    r.status = Response::Status::Died;
    r.message = "answered out of turn on its channel (" + *forged_ + ")";
    r.malformed = true;
    r.forged = true;
    r.detail = line->substr(0, 500);
    buffer_.clear();
    return r;
  }
  answered_ = seq_;
  if (message["ok"].get<bool>()) {
    r.status = Response::Status::Ok;
    r.result = message.value("result", nlohmann::json::object());
    const auto count = message.value("fds", 0);
    if (count > 0) {
      try {
        r.fds = receive_fds(fd_socket_, static_cast<size_t>(count),
                            Clock::now() + std::chrono::seconds(30));
      } catch (const std::exception& error) {
        kill_group();
        r.status = Response::Status::Died;
        r.message = std::string("broke the descriptor channel: ") + error.what();
        r.detail = log_tail();
      }
    }
    return r;
  }
  const auto& error = message["error"];
  const auto text = [&](const char* key, const char* fallback) {
    auto it = error.find(key);
    return it != error.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
  };
  r.status = Response::Status::Error;
  r.error_kind = text("kind", "internal_error");
  r.message = text("message", "");
  r.detail = text("detail", "");
  r.resource = text("resource", "");
  r.memory = text("memory", "");
  r.holding = text("holding", "");
  return r;
}

Response WorkerProcess::died(std::string what) {
  // Reap it to learn how it ended (a signal, an exit status).
  if (pid_ > 0 && wait_status_ == 0) {
    for (int i = 0; i < 50; ++i) {
      int status = 0;
      pid_t got = ::waitpid(pid_, &status, WNOHANG);
      if (got == pid_) {
        wait_status_ = status;
        pid_ = -1;
        break;
      }
      ::usleep(20000);
    }
  }
  Response r;
  r.status = Response::Status::Died;
  r.message = "the worker " + what;
  if (pid_ < 0) r.message += " and " + describe_exit(wait_status_);
  r.detail = log_tail();
  return r;
}

void WorkerProcess::kill_group() {
  // Every process below the worker by name, found before anything is killed (a process whose
  // parent died is another's child): one that left the group (setsid) and cleared its
  // parent-death signal would outlive its relay otherwise, still holding its device memory.
  // Killing the first process of a PID namespace ends all of it; without a namespace each is
  // killed.
  std::vector<int> below;
  if (pid_ > 0) below = hold_descendants(pid_);
  if (group_ > 0) ::kill(-group_, SIGKILL);  // whatever it started, even after it exited
  kill_held(below);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    wait_status_ = status;
    pid_ = -1;
  }
  exited_ = true;
}

void WorkerProcess::stop() {
  if (stopped_) return;
  stopped_ = true;
  bool exited_when_asked = false;
  // Requests sent whose answers were never read (an evaluation a fault ended between a send and
  // its receive): their answers, in turn, may still be on the channel, and are not forged.
  const std::uint64_t last_asked = seq_;
  if (pid_ > 0 && !exited_) {
    send(worker_request(cmd::kExit));
    for (int i = 0; i < 100; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exited_when_asked = true;
        break;
      }
      ::usleep(20000);
    }
  }
  kill_group();  // also ends anything it left running in its group
  // `exit` has no answer: whatever is left on the channel of a worker that exited when asked
  // was written by someone other than the worker answering a request. (One killed while it
  // wrote may leave half an answer; that is not looked at.)
  if (exited_when_asked && from_worker_ >= 0) {
    char chunk[65536];
    for (int reads = 0; reads < 64 && buffer_.size() < kMaxMessageBytes; ++reads) {
      pollfd p{from_worker_, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) break;
      ssize_t n = ::read(from_worker_, chunk, sizeof chunk);
      if (n <= 0) break;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    for (std::size_t end; !forged_ && (end = buffer_.find('\n')) != std::string::npos;) {
      const std::string line = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      const auto message = nlohmann::json::parse(line, nullptr, false);
      const auto seq = message.is_object() ? message.find("seq") : message.end();
      if (answered_ < last_asked && message.is_object() && seq != message.end() &&
          seq->is_number_unsigned() && seq->get<std::uint64_t>() == answered_ + 1) {
        ++answered_;  // the answer to a request sent but not read: its turn
        continue;
      }
      forged_ = fmt::format("a line arrived after the last answer asked for: {}",
                            line.substr(0, std::min<size_t>(line.size(), 200)));
    }
  }
  if (to_worker_ >= 0) ::close(to_worker_);
  if (from_worker_ >= 0) ::close(from_worker_);
  if (fd_socket_ >= 0) ::close(fd_socket_);
  to_worker_ = from_worker_ = fd_socket_ = -1;
}

std::string WorkerProcess::log_tail(size_t bytes) const {
  std::ifstream in(options_.log_file, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  auto start = size > bytes ? size - bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string text(size - start, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

}  // namespace kbv::orchestrate
