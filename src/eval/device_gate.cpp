#include "eval/device_gate.hpp"

#include <utility>

namespace kbv::eval {

namespace {
// The gate this thread holds exclusively, if any (a timing run's own calls pass through).
thread_local const DeviceGate* held_exclusive = nullptr;
}  // namespace

DeviceGate::Hold::Hold(DeviceGate* gate, bool exclusive) : gate_(gate), exclusive_(exclusive) {}

DeviceGate::Hold::Hold(Hold&& other) noexcept
    : gate_(std::exchange(other.gate_, nullptr)), exclusive_(other.exclusive_) {}

DeviceGate::Hold& DeviceGate::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    release();
    gate_ = std::exchange(other.gate_, nullptr);
    exclusive_ = other.exclusive_;
  }
  return *this;
}

DeviceGate::Hold::~Hold() { release(); }

void DeviceGate::Hold::release() {
  if (gate_ == nullptr) return;
  if (exclusive_) {
    gate_->unlock_exclusive();
  } else {
    gate_->unlock_shared();
  }
  gate_ = nullptr;
}

DeviceGate::Hold DeviceGate::shared() {
  if (held_exclusive == this) return {};
  lock_shared();
  return Hold(this, false);
}

DeviceGate::Hold DeviceGate::exclusive() {
  if (held_exclusive == this) return {};  // an evaluation holding the device alone times
  lock_exclusive();
  return Hold(this, true);
}

int DeviceGate::shared_holders() const {
  std::lock_guard lock(mutex_);
  return readers_;
}

bool DeviceGate::held_exclusively() const {
  std::lock_guard lock(mutex_);
  return writer_;
}

bool DeviceGate::held_by_this_thread() const { return held_exclusive == this; }

void DeviceGate::lock_shared() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !writer_ && writers_waiting_ == 0; });
  ++readers_;
}

void DeviceGate::unlock_shared() {
  std::lock_guard lock(mutex_);
  if (--readers_ == 0) changed_.notify_all();
}

void DeviceGate::lock_exclusive() {
  std::unique_lock lock(mutex_);
  ++writers_waiting_;
  changed_.wait(lock, [this] { return !writer_ && readers_ == 0; });
  --writers_waiting_;
  writer_ = true;
  held_exclusive = this;
}

void DeviceGate::unlock_exclusive() {
  {
    std::lock_guard lock(mutex_);
    writer_ = false;
    held_exclusive = nullptr;
  }
  changed_.notify_all();
}

}  // namespace kbv::eval
