#include "eval/memory_ledger.hpp"

#include <algorithm>
#include <utility>

namespace kbv::eval {

MemoryLedger::Reservation::Reservation(Reservation&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      serial_(std::exchange(other.serial_, 0)) {}

MemoryLedger::Reservation& MemoryLedger::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    release();
    ledger_ = std::exchange(other.ledger_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    serial_ = std::exchange(other.serial_, 0);
  }
  return *this;
}

void MemoryLedger::Reservation::release() {
  if (ledger_ == nullptr) return;
  ledger_->give_back(serial_);
  ledger_ = nullptr;
  bytes_ = 0;
  serial_ = 0;
}

double MemoryLedger::passed_oldest() const {
  double bytes = 0;
  for (auto it = held_.lower_bound(waiters_.front().passed_from); it != held_.end(); ++it) {
    bytes += it->second;
  }
  return bytes;
}

bool MemoryLedger::admissible(std::uint64_t ticket, double bytes) const {
  const bool fits = held_.empty() || reserved_ + bytes <= capacity_;
  if (!fits) return false;
  if (waiters_.empty() || waiters_.front().ticket == ticket) return true;
  const Waiter& oldest = waiters_.front();
  // What grows holds memory in use: nothing passes it that would not leave it its room.
  if (oldest.grows) return reserved_ + bytes + oldest.bytes <= capacity_;
  // Within the window anything that fits passes the oldest waiter.
  if (now_() - oldest.since < kPassingWindow) return true;
  // After it, only what leaves the oldest its room once the holders it found have gone.
  return passed_oldest() + bytes + oldest.bytes <= capacity_;
}

void MemoryLedger::size_once(double capacity_bytes) {
  std::lock_guard lock(mutex_);
  if (capacity_ <= 0 && capacity_bytes > 0 && held_.empty()) capacity_ = capacity_bytes;
}

double MemoryLedger::capacity() const {
  std::lock_guard lock(mutex_);
  return capacity_;
}

MemoryLedger::Reservation MemoryLedger::admit(double bytes) {
  const std::uint64_t serial = next_serial_++;
  held_.emplace(serial, bytes);
  reserved_ += bytes;
  return Reservation(this, bytes, serial);
}

std::deque<MemoryLedger::Waiter>::iterator MemoryLedger::first_plain_waiter() {
  return std::find_if(waiters_.begin(), waiters_.end(), [](const Waiter& w) { return !w.grows; });
}

void MemoryLedger::leave_queue(std::uint64_t ticket) {
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [&](const Waiter& w) { return w.ticket == ticket; });
  waiters_.erase(it);
  // The first waiter that holds nothing counts as passed what is admitted from the time it became
  // the first (a growth ahead of it meanwhile changes nothing: what was admitted while the growth
  // waited passed it too).
  auto first = first_plain_waiter();
  if (first != waiters_.end() && first->passed_from == 0) first->passed_from = next_serial_;
}

MemoryLedger::Reservation MemoryLedger::reserve(double bytes) {
  bytes = std::max(0.0, bytes);
  std::unique_lock lock(mutex_);
  if (capacity_ <= 0) return Reservation(nullptr, 0);  // unlimited: nothing to account
  bytes = std::min(bytes, capacity_);
  const std::uint64_t ticket = next_ticket_++;
  if (!admissible(ticket, bytes)) {
    // (The first waiter that holds nothing from now; else from when it becomes the first.)
    const bool first = first_plain_waiter() == waiters_.end();
    waiters_.push_back({ticket, bytes, now_(), first ? next_serial_ : 0, std::nullopt});
    // Woken by every release; also every second, so the passing window closes on time.
    while (!admissible(ticket, bytes)) changed_.wait_for(lock, std::chrono::seconds(1));
    return admit_waiter(ticket, bytes);
  }
  return admit(bytes);
}

MemoryLedger::Reservation MemoryLedger::admit_waiter(std::uint64_t ticket, double bytes) {
  // Admitted before it leaves the queue: the next oldest waits for it, it did not pass it.
  // Should admitting throw (bad_alloc), the waiter still leaves: a ghost oldest waiter would
  // hold back every later reservation.
  std::optional<Reservation> reservation;
  try {
    reservation.emplace(admit(bytes));
  } catch (...) {
    leave_queue(ticket);
    changed_.notify_all();
    throw;
  }
  leave_queue(ticket);
  changed_.notify_all();  // the next oldest may now be admissible
  return std::move(*reservation);
}

bool MemoryLedger::growths_can_all_finish(double held, double more) const {
  // What is free once every reservation that does not wait has gone (they need nothing more to
  // finish); each growth in turn then needs its `more` of it, and gives back all it held after.
  double waiting_held = held;
  for (const Waiter& w : waiters_) {
    if (w.grows) waiting_held += held_.at(*w.grows);
  }
  double free = capacity_ - waiting_held;
  for (const Waiter& w : waiters_) {
    if (!w.grows) break;  // (the growths are first)
    if (w.bytes > free) return false;
    free += held_.at(*w.grows);
  }
  return more <= free;
}

bool MemoryLedger::grow(Reservation& held, double more) {
  more = std::max(0.0, more);
  std::unique_lock lock(mutex_);
  if (capacity_ <= 0) return held.ledger_ == nullptr;  // unlimited: nothing to account
  auto mine = held.ledger_ == this ? held_.find(held.serial_) : held_.end();
  if (mine == held_.end()) return false;
  more = std::min(more, std::max(0.0, capacity_ - mine->second));
  auto grant = [&] {
    mine->second += more;
    reserved_ += more;
    held.bytes_ += more;
    return true;
  };
  // At once where it fits and leaves the first growth waiting its room (none waits: it fits).
  const std::uint64_t ticket = next_ticket_++;
  const bool growths_wait = !waiters_.empty() && waiters_.front().grows;
  if (reserved_ + more <= capacity_ &&
      (!growths_wait || reserved_ + more + waiters_.front().bytes <= capacity_)) {
    return grant();
  }
  if (!growths_can_all_finish(mine->second, more)) return false;
  // Behind the growths waiting, before every waiter that holds nothing.
  waiters_.insert(first_plain_waiter(), {ticket, more, now_(), next_serial_, held.serial_});
  // (Woken by every release and growth granted; the entry `mine` stays valid: std::map.)
  while (!admissible(ticket, more)) changed_.wait_for(lock, std::chrono::seconds(1));
  grant();
  leave_queue(ticket);
  changed_.notify_all();  // the next oldest may now be admissible
  return true;
}

std::optional<MemoryLedger::Reservation> MemoryLedger::try_reserve(double bytes) {
  bytes = std::max(0.0, bytes);
  std::lock_guard lock(mutex_);
  if (capacity_ <= 0) return Reservation(nullptr, 0);
  if (bytes > capacity_ || !admissible(next_ticket_, bytes)) return std::nullopt;
  ++next_ticket_;
  return admit(bytes);
}

void MemoryLedger::give_back(std::uint64_t serial) {
  {
    std::lock_guard lock(mutex_);
    held_.erase(serial);
    reserved_ = 0;  // summed anew: no drift from adding and taking away doubles
    for (const auto& [_, bytes] : held_) reserved_ += bytes;
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
