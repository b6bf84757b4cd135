// File descriptors over a Unix socket (SCM_RIGHTS): the shared blocks of a case travel from the
// reference worker through the orchestrator to the candidate's worker as descriptors
// (docs/case-path.md). Each worker has a SOCK_SEQPACKET socket for this beside its JSON channel;
// one message carries the descriptors of one answer or request. The orchestrator never maps a
// block: it holds the descriptors only between receiving and forwarding them.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

namespace kbv::orchestrate {

// Descriptors owned together: closed when the last copy of the set goes.
class FdSet {
 public:
  FdSet() = default;
  explicit FdSet(std::vector<int> fds) : fds_(std::make_shared<Owned>(std::move(fds))) {}
  const std::vector<int>& fds() const;
  size_t size() const { return fds_ ? fds_->fds.size() : 0; }
  bool empty() const { return size() == 0; }

 private:
  struct Owned {
    explicit Owned(std::vector<int> f) : fds(std::move(f)) {}
    ~Owned();
    Owned(const Owned&) = delete;
    Owned& operator=(const Owned&) = delete;
    std::vector<int> fds;
  };
  std::shared_ptr<Owned> fds_;
};

// At most this many descriptors in one message (the kernel's SCM_MAX_FD is 253).
inline constexpr size_t kMaxFdsPerMessage = 64;

// Sends `fds` as one message on `socket`. Waits (poll) while the socket's buffer is full, until
// `deadline`; throws std::runtime_error when it cannot send (the peer is gone, or never reads).
void send_fds(int socket, const std::vector<int>& fds,
              std::chrono::steady_clock::time_point deadline);

// Receives one message and the descriptors it carries, waiting until `deadline`. Throws
// std::runtime_error on a timeout, a closed peer, a message without descriptors or with more
// than `expected` (the extra ones are closed), so a confused peer never leaks descriptors here.
FdSet receive_fds(int socket, size_t expected, std::chrono::steady_clock::time_point deadline);

}  // namespace kbv::orchestrate
