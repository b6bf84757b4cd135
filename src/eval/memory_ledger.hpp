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
// large and the passing one small (they do not delay it noticeably). Once the oldest waiter has
// waited kPassingWindow, only what leaves it its room passes: the reservations admitted since it
// became the oldest, with the passing one, must fit beside it, so it is admitted as soon as those
// it found held have gone. Before, nothing passed it then: with KernelBench's 6 GB elementwise
// problems (54 GB each in a 70 GB ledger) one waiting behind another stopped every evaluation
// on the device until the first had finished, though the small ones fit in the 16 GB beside it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
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
    Reservation(MemoryLedger* ledger, double bytes, std::uint64_t serial = 0)
        : ledger_(ledger), bytes_(bytes), serial_(serial) {}
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { release(); }
    void release();
    bool held() const { return ledger_ != nullptr; }
    double bytes() const { return bytes_; }  // as granted (at most the capacity)

   private:
    friend class MemoryLedger;
    MemoryLedger* ledger_ = nullptr;
    double bytes_ = 0;
    std::uint64_t serial_ = 0;  // its place in the order of admission
  };

  // Waits until `bytes` (clamped to the capacity) fit beside the reservations held.
  Reservation reserve(double bytes);
  // `held` (a reservation of this ledger) grown by `more` bytes, waiting beside what it holds
  // until they fit: for an evaluation whose first draw measured more than it reserved. Given
  // back and waited for anew (reserve()), the memory it holds, in use on the device by its drawn
  // cases, would be in no one's account while the wait lasts, and the next evaluation to take the
  // whole ledger would draw into a device still holding it: session 31's H100 audit ran out of
  // device memory three times in 13 s so, beside a matmul that had given back its 28 GB to wait
  // for 52. A growth goes before every waiter that holds nothing, behind the growths that wait
  // already, and nothing passes the first that would not leave it its room: it frees its memory
  // soonest by finishing. Clamped so that `held` is at most the capacity. True once grown (the
  // reservation's bytes then say how much it holds). False, at once and with nothing changed,
  // where waiting could wait forever: where the growths waiting, this one among them, could not
  // all be granted in turn once every reservation not waiting has gone (each holding what
  // another waits for); the caller then frees what it can and waits anew (reserve()). Also
  // false for a reservation not of this ledger.
  bool grow(Reservation& held, double more);
  // `bytes` now, or nothing: never waits, never clamps (more than the capacity is refused), and
  // never takes room the passing rule keeps for the oldest waiter. For work that is worth doing
  // only when it is free to do (a reference drawn ahead of its evaluation). Unlimited: always
  // granted.
  std::optional<Reservation> try_reserve(double bytes);

  double capacity() const;
  double reserved_bytes() const;
  int waiting() const;

  // For tests: the clock the passing window is measured on.
  void set_clock_for_testing(std::chrono::steady_clock::time_point (*now)()) { now_ = now; }

 private:
  void give_back(std::uint64_t serial);
  bool admissible(std::uint64_t ticket, double bytes) const;
  Reservation admit(double bytes);
  // A waiter's admission (under the lock): admitted, then out of the queue, the others woken.
  Reservation admit_waiter(std::uint64_t ticket, double bytes);
  // Bytes held by the reservations admitted since the oldest waiter became the oldest.
  double passed_oldest() const;
  void leave_queue(std::uint64_t ticket);
  // Whether the growths waiting and one more (`held`, `more`) could all be granted in turn,
  // each with what the ones before it leave once every reservation not waiting has gone.
  bool growths_can_all_finish(double held, double more) const;

  double capacity_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  double reserved_ = 0;
  std::map<std::uint64_t, double> held_;  // admission serial -> bytes
  std::uint64_t next_serial_ = 1;
  std::uint64_t next_ticket_ = 0;
  struct Waiter {
    std::uint64_t ticket;
    double bytes;
    std::chrono::steady_clock::time_point since;
    // The first admission serial after it became the first waiter that holds nothing:
    // reservations from there on passed it; the ones before are those it waits for. 0: not yet
    // the first.
    std::uint64_t passed_from;
    // A growth (grow()): the admission serial of the reservation it keeps while it waits.
    std::optional<std::uint64_t> grows;
  };
  std::deque<Waiter> waiters_;  // oldest first (the growths first, in their order)
  // The first waiter that is not a growth (end() where none waits).
  std::deque<Waiter>::iterator first_plain_waiter();
  std::chrono::steady_clock::time_point (*now_)() = &std::chrono::steady_clock::now;
};

}  // namespace kbv::eval
