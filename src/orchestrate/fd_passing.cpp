#include "orchestrate/fd_passing.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace kbv::orchestrate {
using Clock = std::chrono::steady_clock;

namespace {

// Waits for `events` on `socket` until `deadline`; false on a timeout.
bool wait_for(int socket, short events, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{socket, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) {
      throw std::runtime_error(std::string("poll on the descriptor socket failed: ") +
                               std::strerror(errno));
    }
  }
}

void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

}  // namespace

FdSet::Owned::~Owned() { close_all(fds); }

const std::vector<int>& FdSet::fds() const {
  static const std::vector<int> none;
  return fds_ ? fds_->fds : none;
}

void send_fds(int socket, const std::vector<int>& fds, Clock::time_point deadline) {
  if (fds.empty()) return;
  if (fds.size() > kMaxFdsPerMessage) {
    throw std::logic_error("too many descriptors for one message");
  }
  char byte = 'f';
  iovec io{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&msg);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  while (true) {
    // Never blocks: a peer that stops reading (a hung or hostile candidate) must not hang kbv.
    ssize_t n = ::sendmsg(socket, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == 1) return;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(socket, POLLOUT, deadline)) {
        throw std::runtime_error("the worker did not take the descriptors sent to it in time");
      }
      continue;
    }
    throw std::runtime_error(std::string("sending descriptors to a worker failed: ") +
                             std::strerror(errno));
  }
}

FdSet receive_fds(int socket, size_t expected, Clock::time_point deadline) {
  while (true) {
    if (!wait_for(socket, POLLIN, deadline)) {
      throw std::runtime_error("the worker announced descriptors that did not arrive in time");
    }
    char byte = 0;
    iovec io{&byte, 1};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage), 0);
    msghdr msg{};
    msg.msg_iov = &io;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t n = ::recvmsg(socket, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0) {
      throw std::runtime_error(std::string("receiving descriptors from a worker failed: ") +
                               std::strerror(errno));
    }
    if (n == 0) throw std::runtime_error("the worker closed its descriptor socket");
    std::vector<int> fds;
    for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
      if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const auto* data = reinterpret_cast<const int*>(CMSG_DATA(h));
      fds.insert(fds.end(), data, data + count);
    }
    FdSet owned(std::move(fds));  // closed on any error below
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      throw std::runtime_error("a worker sent more descriptors than one message may carry");
    }
    if (owned.size() != expected) {
      throw std::runtime_error("a worker sent " + std::to_string(owned.size()) +
                               " descriptors where it announced " + std::to_string(expected));
    }
    return owned;
  }
}

}  // namespace kbv::orchestrate
