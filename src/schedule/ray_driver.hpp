// A Ray driver of kbv's as a child process: `python -m <module> <arguments>` with kbv's Python
// package importable (Ray's supported client is Python). `kbv run --ray` runs kbv.ray_run over a
// plan file; `kbv serve --ray` runs kbv.ray_serve and feeds it batches on its standard input.
// Either writes JSON lines on its standard output, read here line by line; its standard error is
// this process's (its progress lines reach the user as they are).
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <string>
#include <vector>

namespace kbv::schedule {

class RayDriverProcess {
 public:
  // Starts it; `with_input`: its standard input is a pipe for send(), else this process's. The
  // driver ends with the thread that starts it (PR_SET_PDEATHSIG: Ctrl-C, kill -9 of kbv): with
  // no one to store its rows its tasks would evaluate for nothing, and Ray stops a dead driver's
  // tasks. So start it on a thread that outlives it.
  RayDriverProcess(const std::string& module, const std::vector<std::string>& arguments,
                   bool with_input = false);
  ~RayDriverProcess();  // kills it unless it was waited for
  RayDriverProcess(const RayDriverProcess&) = delete;
  RayDriverProcess& operator=(const RayDriverProcess&) = delete;

  // The next line of its output, false at its end.
  bool next(std::string& line);
  // One line to its input; false when it can no longer read (it ended).
  bool send(const std::string& line);
  // End of its input: it ends once it has finished what it was sent.
  void close_input();
  // Its exit status (128 + the signal when it was killed).
  int wait();
  void kill();

 private:
  pid_t pid_ = -1;
  bool waited_ = false;
  FILE* lines_ = nullptr;
  int input_ = -1;
};

}  // namespace kbv::schedule
