#include "serve/server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <thread>

#include "eval/workspace.hpp"
#include "serve/auth.hpp"
#include "serve/build_ahead.hpp"
#include "serve/evaluators.hpp"
#include "serve/http_routes.hpp"
#include "serve/job_queue.hpp"
#include "store/store.hpp"

namespace kbv::serve {

namespace fs = std::filesystem;

namespace {

// How long the HTTP layer may take to close its connections after the drain: a client that
// keeps a connection open (a slow sender) must not hold the process forever. Everything that
// matters is on disk by then.
constexpr auto kHttpStopGrace = std::chrono::seconds(10);

}  // namespace

int serve(const ServeOptions& options) {
  const std::string token = read_token_file(options.token_file);
  auto log = options.server.placement.progress;
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  // Said, not refused: a token others on the machine can read is a token they hold.
  const auto perms = fs::status(options.token_file).permissions();
  if ((perms & (fs::perms::group_read | fs::perms::others_read)) != fs::perms::none) {
    fmt::print(stderr, "kbv serve: warning: {} is readable by other users (chmod 600 it)\n",
               options.token_file.string());
  }

  // Signals are taken by sigwait below, never by a handler: blocked here, before any thread
  // starts, so every thread inherits the mask. A client that hangs up must not kill the server.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  store::Store db(options.database);
  fs::path folder = options.database;
  folder += ".serve";
  RequestPolicy policy{options.server.settings, options.server.limits};
  JobQueue queue(folder, policy, options.max_queue);
  const size_t resumed = queue.queued();

  const EvaluatorsKind& kind = evaluators_kind(options.evaluators);
  std::vector<std::string> devices = options.devices;
  if (devices.empty()) devices.push_back(options.server.settings.device);
  // The build workers' folders, reclaimed by the next kbv when this one is killed.
  const auto& work_dir = options.server.placement.work_dir;
  const fs::path scratch = (work_dir.empty() ? fs::temp_directory_path() : work_dir) /
                           fmt::format("kbv-build-{}", ::getpid());
  fs::create_directories(scratch);
  eval::FolderOwner scratch_owner(scratch, /*keep=*/false);
  std::unique_ptr<BuildAhead> builds;
  if (kind.builds_here && options.build_jobs > 0) {
    builds =
        std::make_unique<BuildAhead>(options.server, devices.front(), options.build_jobs, scratch);
  }
  PoolSettings pool_settings{options.server, devices,    options.workers_per_device, log,
                             builds.get(),   options.ray};
  const auto pool = kind.make(queue, db, pool_settings);
  Service service(policy, queue, db, *pool, options.server, devices.front(), options.service,
                  builds.get());

  service.resume_builds();

  httplib::Server http;
  const size_t threads = static_cast<size_t>(std::max(4, options.http_threads));
  // One thread per connection: a slow client holds its own thread only (read timeouts bound
  // each read), and the pool is larger than the connections ?wait=1 may hold.
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(options.max_body_bytes);
  http.set_read_timeout(10, 0);
  http.set_write_timeout(30, 0);
  http.set_keep_alive_timeout(5);
  install_routes(http, service, token, options.max_body_bytes);

  int port = options.port;
  if (port == 0) {
    port = http.bind_to_any_port(options.host);
  } else if (!http.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    throw eval::UsageError(
        fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)",
                    options.host, options.port));
  }
  pool->start();
  std::thread listener([&] { http.listen_after_bind(); });
  // The one line a supervisor (and the tests) read for the address, on standard output.
  fmt::print("kbv serve: listening on http://{}:{} ({}; {} queued job{} resumed; results in {})\n",
             options.host, port, pool->describe(), resumed, resumed == 1 ? "" : "s",
             options.database.string());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  say(fmt::format("{}: draining: evaluations in flight finish, new work gets 503",
                  signal_number == SIGTERM ? "SIGTERM" : "SIGINT"));
  service.drain();
  // A second signal stops at once (a drain waiting on a long evaluation, an operator who means
  // it): the evaluations in flight are lost, their jobs still marked running in the queue, and
  // the next start queues them again; the workers die with the process (PR_SET_PDEATHSIG).
  // Copies: the thread outlives this function's frame.
  std::thread([stop_signals, log] {
    int again = 0;
    sigwait(&stop_signals, &again);
    if (log)
      log(
          fmt::format("{} again: stopping now; the evaluations in flight run again after the "
                      "next start",
                      again == SIGTERM ? "SIGTERM" : "SIGINT"));
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(128 + again);
  }).detach();
  pool->join();
  if (builds) builds->stop();
  const size_t left = queue.queued();
  say(fmt::format("drained: {} queued job{} kept in {} for the next start", left,
                  left == 1 ? "" : "s", folder.string()));
  auto stopped = std::async(std::launch::async, [&] {
    http.stop();
    listener.join();
  });
  if (stopped.wait_for(kHttpStopGrace) != std::future_status::ready) {
    say("connections still open after the drain; exiting without them");
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(0);
  }
  return 0;
}

}  // namespace kbv::serve
