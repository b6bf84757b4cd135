// The answer channel's turns once a worker has stopped (orchestrate/worker_process.hpp): a line
// nobody asked for is forged, but the answer to a request that was sent and never read (an
// evaluation a fault of kbv's ended between its send and its receive) is its worker's own.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "orchestrate/worker_process.hpp"
#include "orchestrate/worker_protocol.hpp"

namespace fs = std::filesystem;
using kbv::orchestrate::WorkerOptions;
using kbv::orchestrate::WorkerProcess;

namespace {

// A worker that answers every request in turn (echoing its seq) and exits when asked; with
// FAKE_EXTRA=1 it writes each answer twice, with FAKE_EXTRA=2 its answer names request 99.
constexpr const char* kFakeWorker = R"(
import json, os, sys
channel_in = os.fdopen(3, "r")
channel_out = os.fdopen(4, "w")
extra = os.environ.get("FAKE_EXTRA", "0")
for line in channel_in:
    request = json.loads(line)
    if request["cmd"] == "exit":
        sys.exit(0)
    seq = 99 if extra == "2" else request["seq"]
    answer = json.dumps({"ok": True, "result": {}, "seq": seq}) + "\n"
    channel_out.write(answer * (2 if extra == "1" else 1))
    channel_out.flush()
)";

struct FakeWorker {
  fs::path dir;
  fs::path answered;  // written by the worker once it has answered
  std::unique_ptr<WorkerProcess> process;

  explicit FakeWorker(const std::string& extra) {
    dir = fs::temp_directory_path() /
          ("kbv-channel-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir);
    std::ofstream(dir / "fake_worker.py") << kFakeWorker;
    const auto script = dir / "fake_python.sh";
    std::ofstream(script) << "#!/bin/sh\nexec python3 \"" << (dir / "fake_worker.py").string()
                          << "\"\n";
    fs::permissions(script, fs::perms::owner_all);
    WorkerOptions options;
    options.role = kbv::orchestrate::WorkerRole::Reference;
    options.python = script.string();
    options.working_directory = dir;
    options.log_file = dir / "worker.log";
    options.environment = {{"FAKE_EXTRA", extra}};
    options.sandbox.enabled = false;
    process = std::make_unique<WorkerProcess>(options);
  }
  ~FakeWorker() {
    process.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // A request sent and, `read` or not, answered by the worker by the time this returns.
  void ask(bool read) {
    process->send(kbv::orchestrate::worker_request(kbv::orchestrate::cmd::kPing));
    if (read) {
      auto answer = process->receive(std::chrono::seconds(30));
      ASSERT_TRUE(answer.ok()) << answer.message;
    } else {
      ASSERT_TRUE(process->ready(std::chrono::seconds(30)));  // its answer is on the channel
    }
  }
};

TEST(WorkerChannel, AnAnswerSentButNeverReadIsNotForged) {
  FakeWorker worker("0");
  worker.ask(/*read=*/true);
  worker.ask(/*read=*/false);  // the evaluation ended before reading it
  worker.process->stop();
  EXPECT_FALSE(worker.process->forged().has_value()) << *worker.process->forged();
}

TEST(WorkerChannel, ALineAfterTheLastAnswerAskedForIsForged) {
  FakeWorker worker("1");
  worker.ask(/*read=*/true);  // its answer read, a second copy left behind
  worker.process->stop();
  ASSERT_TRUE(worker.process->forged().has_value());
  EXPECT_NE(worker.process->forged()->find("after the last answer"), std::string::npos);
}

TEST(WorkerChannel, ASecondLineBehindAnUnreadAnswerIsForged) {
  FakeWorker worker("1");
  worker.ask(/*read=*/false);  // unread: its first copy is its turn, the second is not
  worker.process->stop();
  EXPECT_TRUE(worker.process->forged().has_value());
}

TEST(WorkerChannel, AnUnreadAnswerNamingAnotherRequestIsForged) {
  FakeWorker worker("2");
  worker.ask(/*read=*/false);
  worker.process->stop();
  EXPECT_TRUE(worker.process->forged().has_value());
}

}  // namespace
