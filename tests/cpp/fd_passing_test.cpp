// Descriptors over a socket (orchestrate/fd_passing.hpp): they arrive as working descriptors of
// the same object, a count that differs from the one announced is refused without leaking, and a
// peer that never reads cannot hang the sender.
#include "orchestrate/fd_passing.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace kbv::orchestrate {
namespace {

using Clock = std::chrono::steady_clock;

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
    a = fds[0];
    b = fds[1];
  }
  ~Pair() {
    ::close(a);
    ::close(b);
  }
};

bool open_fd(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(FdPassing, DescriptorsArriveAndReferToTheSameObject) {
  Pair pair;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  send_fds(pair.a, {pipe_fds[1]}, Clock::now() + std::chrono::seconds(5));
  ::close(pipe_fds[1]);
  FdSet received = receive_fds(pair.b, 1, Clock::now() + std::chrono::seconds(5));
  ASSERT_EQ(received.size(), 1u);
  ASSERT_EQ(::write(received.fds()[0], "x", 1), 1);
  char byte = 0;
  ASSERT_EQ(::read(pipe_fds[0], &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
  ::close(pipe_fds[0]);
}

TEST(FdPassing, AFdSetClosesItsDescriptorsWithItsLastCopy) {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  {
    FdSet set({fd});
    FdSet copy = set;
    EXPECT_TRUE(open_fd(fd));
  }
  EXPECT_FALSE(open_fd(fd));
}

TEST(FdPassing, AnUnexpectedCountIsRefusedAndNothingLeaks) {
  Pair pair;
  int one = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int two = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  send_fds(pair.a, {one, two}, Clock::now() + std::chrono::seconds(5));
  int before = ::open("/dev/null", O_RDONLY);  // the next free number
  ::close(before);
  EXPECT_THROW(receive_fds(pair.b, 1, Clock::now() + std::chrono::seconds(5)), std::runtime_error);
  int after = ::open("/dev/null", O_RDONLY);
  EXPECT_EQ(after, before);  // the two received were closed again
  ::close(after);
  ::close(one);
  ::close(two);
}

TEST(FdPassing, NothingArrivingIsATimeoutNotAHang) {
  Pair pair;
  auto started = Clock::now();
  EXPECT_THROW(receive_fds(pair.b, 1, Clock::now() + std::chrono::milliseconds(200)),
               std::runtime_error);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));
}

TEST(FdPassing, APeerThatNeverReadsCannotHangTheSender) {
  Pair pair;
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto started = Clock::now();
  bool refused = false;
  for (int i = 0; i < 100000 && !refused; ++i) {
    try {
      send_fds(pair.a, {fd}, Clock::now() + std::chrono::milliseconds(100));
    } catch (const std::runtime_error&) {
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(30));
  ::close(fd);
}

TEST(FdPassing, AClosedPeerIsReported) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
  ::close(fds[0]);
  EXPECT_THROW(receive_fds(fds[1], 1, Clock::now() + std::chrono::seconds(5)), std::runtime_error);
  ::close(fds[1]);
}

}  // namespace
}  // namespace kbv::orchestrate
