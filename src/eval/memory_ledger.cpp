#include "eval/memory_ledger.hpp"

#include <algorithm>
#include <utility>

namespace kbv::eval {

MemoryLedger::Reservation::Reservation(Reservation&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryLedger::Reservation& MemoryLedger::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    release();
    ledger_ = std::exchange(other.ledger_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MemoryLedger::Reservation::release() {
  if (ledger_ == nullptr) return;
  ledger_->give_back(bytes_);
  ledger_ = nullptr;
  bytes_ = 0;
}

bool MemoryLedger::admissible(std::uint64_t ticket, double bytes) const {
  const bool fits = holders_ == 0 || reserved_ + bytes <= capacity_;
  if (!fits) return false;
  if (waiters_.empty() || waiters_.front().ticket == ticket) return true;
  // Passing the oldest waiter is allowed within the window only.
  return now_() - waiters_.front().since < kPassingWindow;
}

void MemoryLedger::size_once(double capacity_bytes) {
  std::lock_guard lock(mutex_);
  if (capacity_ <= 0 && capacity_bytes > 0 && holders_ == 0) capacity_ = capacity_bytes;
}

double MemoryLedger::capacity() const {
  std::lock_guard lock(mutex_);
  return capacity_;
}

MemoryLedger::Reservation MemoryLedger::reserve(double bytes) {
  bytes = std::max(0.0, bytes);
  std::unique_lock lock(mutex_);
  if (capacity_ <= 0) return Reservation(nullptr, 0);  // unlimited: nothing to account
  bytes = std::min(bytes, capacity_);
  const std::uint64_t ticket = next_ticket_++;
  if (!admissible(ticket, bytes)) {
    waiters_.push_back({ticket, now_()});
    // Woken by every release; also every second, so the passing window closes on time.
    while (!admissible(ticket, bytes)) changed_.wait_for(lock, std::chrono::seconds(1));
    waiters_.erase(std::find_if(waiters_.begin(), waiters_.end(),
                                [&](const Waiter& w) { return w.ticket == ticket; }));
    changed_.notify_all();  // the next oldest may now be admissible
  }
  reserved_ += bytes;
  ++holders_;
  return Reservation(this, bytes);
}

std::optional<MemoryLedger::Reservation> MemoryLedger::try_reserve(double bytes) {
  bytes = std::max(0.0, bytes);
  std::lock_guard lock(mutex_);
  if (capacity_ <= 0) return Reservation(nullptr, 0);
  if (bytes > capacity_ || !admissible(next_ticket_, bytes)) return std::nullopt;
  ++next_ticket_;
  reserved_ += bytes;
  ++holders_;
  return Reservation(this, bytes);
}

void MemoryLedger::give_back(double bytes) {
  {
    std::lock_guard lock(mutex_);
    reserved_ = std::max(0.0, reserved_ - bytes);
    if (--holders_ == 0) reserved_ = 0;
  }
  changed_.notify_all();
}

double MemoryLedger::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return reserved_;
}

int MemoryLedger::waiting() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(waiters_.size());
}

}  // namespace kbv::eval
