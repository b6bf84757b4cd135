#include "schedule/ray_driver.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <stdexcept>

#include "orchestrate/worker_process.hpp"

namespace kbv::schedule {

RayDriverProcess::RayDriverProcess(const std::string& module,
                                   const std::vector<std::string>& arguments, bool with_input) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe");
  int in[2] = {-1, -1};
  if (with_input && ::pipe2(in, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error("cannot create a pipe");
  }
  const std::string python = orchestrate::locate_python();
  // The driver module is found where kbv's worker package is (a build tree's source folder, or
  // the installed package), ahead of whatever PYTHONPATH already holds.
  std::string pythonpath = orchestrate::locate_pythonpath();
  if (const char* existing = std::getenv("PYTHONPATH"); existing && *existing) {
    if (!pythonpath.empty()) pythonpath += ':';
    pythonpath += existing;
  }
  std::vector<std::string> words = {python, "-m", module};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("cannot start the Ray driver: fork failed");
  if (pid_ == 0) {
    // SIGKILL, since Ray's handler answers SIGTERM with a stack dump, which is noise here.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out[1], STDOUT_FILENO);
    if (with_input) ::dup2(in[0], STDIN_FILENO);
    if (!pythonpath.empty()) ::setenv("PYTHONPATH", pythonpath.c_str(), 1);
    ::execvp(argv[0], argv.data());
    fmt::print(stderr, "kbv: cannot run {} for the Ray driver\n", python);
    ::_exit(127);
  }
  ::close(out[1]);
  lines_ = ::fdopen(out[0], "r");
  if (with_input) {
    ::close(in[0]);
    input_ = in[1];
  }
}

RayDriverProcess::~RayDriverProcess() {
  if (input_ >= 0) ::close(input_);
  if (lines_) std::fclose(lines_);
  if (pid_ > 0 && !waited_) {
    ::kill(pid_, SIGKILL);  // as when this process dies (above)
    ::waitpid(pid_, nullptr, 0);
  }
}

bool RayDriverProcess::next(std::string& line) {
  char* buffer = nullptr;
  size_t size = 0;
  const ssize_t n = ::getline(&buffer, &size, lines_);
  if (n >= 0) line.assign(buffer, static_cast<size_t>(n));
  std::free(buffer);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  return n >= 0;
}

bool RayDriverProcess::send(const std::string& line) {
  if (input_ < 0) return false;
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    // MSG_NOSIGNAL is for sockets; a pipe whose reader is gone raises SIGPIPE, which kbv serve
    // ignores (EPIPE here instead).
    const ssize_t n = ::write(input_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void RayDriverProcess::close_input() {
  if (input_ >= 0) ::close(input_);
  input_ = -1;
}

int RayDriverProcess::wait() {
  int status = 0;
  ::waitpid(pid_, &status, 0);
  waited_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void RayDriverProcess::kill() {
  if (pid_ > 0 && !waited_) ::kill(pid_, SIGKILL);
}

}  // namespace kbv::schedule
