// DeviceGate: lets several evaluations share one device while only one of them times.
//
// `kbv run` may evaluate several candidates on one GPU at once (--workers-per-device): loading,
// correctness checks, re-checks and memory passes overlap, which fills the GPU and the CPUs that
// one evaluation alone leaves idle. Timing must not overlap with anything on that device, so a
// timing run takes the gate exclusively and every other exchange with a worker on the device
// takes it shared. Writers are preferred: once a timing run waits, no new shared holder enters,
// so it waits at most for the exchanges already in flight (one call each), never for whole
// evaluations.
#pragma once

#include <condition_variable>
#include <mutex>

#include "eval/memory_ledger.hpp"

namespace kbv::eval {

class DeviceGate {
 public:
  class Hold {
   public:
    Hold() = default;
    Hold(DeviceGate* gate, bool exclusive);
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold();
    void release();
    bool held() const { return gate_ != nullptr; }

   private:
    DeviceGate* gate_ = nullptr;
    bool exclusive_ = false;
  };

  // A shared hold; none (a no-op) when this thread already holds the gate exclusively, so the
  // calls a timing run makes do not wait for themselves.
  Hold shared();
  // The exclusive hold of a timing run: waits for shared holders to leave, blocks new ones.
  // None (a no-op) when this thread holds it already (an evaluation too large to share the
  // device holds it throughout, and its timing run asks again).
  Hold exclusive();

  // The device's memory, reserved by the evaluations that share it (eval/memory_ledger.hpp).
  MemoryLedger& memory() { return memory_; }
  // Its part for reference sessions started ahead of their evaluations (memory_plan.hpp,
  // kAheadShare): apart, so that work ahead never waits for, nor delays, an evaluation.
  MemoryLedger& ahead() { return ahead_; }

  // For tests and progress lines.
  int shared_holders() const;
  bool held_exclusively() const;
  // Whether the calling thread holds it exclusively (a timing run, an evaluation alone).
  bool held_by_this_thread() const;

 private:
  void lock_shared();
  void unlock_shared();
  void lock_exclusive();
  void unlock_exclusive();

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int readers_ = 0;
  int writers_waiting_ = 0;
  bool writer_ = false;
  MemoryLedger memory_;
  MemoryLedger ahead_;
};

}  // namespace kbv::eval
