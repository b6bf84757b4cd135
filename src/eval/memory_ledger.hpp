// MemoryLedger: device memory reserved by the evaluations that share one device.
//
// Several evaluations run side by side on a GPU (kbv run's and kbv audit's workers per device).
// KernelBench's largest problems need tens of GB each at their peak (a 6.4 GB input drawn, its
// float64 truth, the candidate's outputs), so four of them at once run a 141 GB H200 dry
// (session 9, call 2). Before drawing, each evaluation reserves what the memory plan says it
// may need at its peak; a reservation waits while the device's reservations would exceed its
// capacity, and one that alone exceeds it waits until the device is free of reservations (it
// then has the device's memory to itself). Small problems run beside a large one instead of
// waiting behind it, which "the device alone" (the earlier rule) made them do.
//
// Fairness: a reservation that fits passes one that waits, since the waiting one is usually
// large and the passing one small (they do not delay it noticeably), but once the oldest waiter
// has waited kPassingWindow, nothing passes it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace kbv::eval {

class MemoryLedger {
 public:
  static constexpr std::chrono::milliseconds kPassingWindow{30000};

  // capacity_bytes <= 0: unlimited (every reservation passes at once) until size_once().
  explicit MemoryLedger(double capacity_bytes = 0) : capacity_(capacity_bytes) {}

  // The capacity, once: the first evaluation on the device that learns its memory sets it (the
  // device's size is known only from a worker that opened it). Later calls change nothing.
  void size_once(double capacity_bytes);

  class Reservation {
   public:
    Reservation() = default;
    Reservation(MemoryLedger* ledger, double bytes) : ledger_(ledger), bytes_(bytes) {}
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { release(); }
    void release();
    bool held() const { return ledger_ != nullptr; }
    double bytes() const { return bytes_; }  // as granted (at most the capacity)

   private:
    MemoryLedger* ledger_ = nullptr;
    double bytes_ = 0;
  };

  // Waits until `bytes` (clamped to the capacity) fit beside the reservations held.
  Reservation reserve(double bytes);
  // `bytes` now, or nothing: never waits, never clamps (more than the capacity is refused), and
  // never passes a waiter the passing window protects. For work that is worth doing only when
  // it is free to do (a reference drawn ahead of its evaluation). Unlimited: always granted.
  std::optional<Reservation> try_reserve(double bytes);

  double capacity() const;
  double reserved_bytes() const;
  int waiting() const;

  // For tests: the clock the passing window is measured on.
  void set_clock_for_testing(std::chrono::steady_clock::time_point (*now)()) { now_ = now; }

 private:
  void give_back(double bytes);
  bool admissible(std::uint64_t ticket, double bytes) const;

  double capacity_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  double reserved_ = 0;
  int holders_ = 0;
  std::uint64_t next_ticket_ = 0;
  struct Waiter {
    std::uint64_t ticket;
    std::chrono::steady_clock::time_point since;
  };
  std::deque<Waiter> waiters_;  // oldest first
  std::chrono::steady_clock::time_point (*now_)() = &std::chrono::steady_clock::now;
};

}  // namespace kbv::eval
