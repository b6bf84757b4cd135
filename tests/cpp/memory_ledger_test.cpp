#include "eval/memory_ledger.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

using kbv::eval::MemoryLedger;
using namespace std::chrono_literals;

namespace {
constexpr double GB = 1e9;

template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

// A clock the tests move by hand (the passing window).
std::atomic<long long> fake_ms{0};
std::chrono::steady_clock::time_point fake_now() {
  return std::chrono::steady_clock::time_point(std::chrono::milliseconds(fake_ms.load()));
}
}  // namespace

TEST(MemoryLedger, ReservationsWithinTheCapacityPassAtOnce) {
  MemoryLedger ledger(100 * GB);
  auto a = ledger.reserve(40 * GB);
  auto b = ledger.reserve(60 * GB);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 100 * GB);
  a.release();
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 60 * GB);
}

TEST(MemoryLedger, OneThatDoesNotFitWaitsForARelease) {
  MemoryLedger ledger(100 * GB);
  auto large = ledger.reserve(70 * GB);
  std::atomic<bool> granted{false};
  std::thread t([&] {
    auto second = ledger.reserve(50 * GB);
    granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(granted);
  large.release();
  t.join();
  EXPECT_TRUE(granted);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 0);
}

TEST(MemoryLedger, MoreThanTheCapacityIsTheDeviceToItself) {
  MemoryLedger ledger(100 * GB);
  auto small = ledger.reserve(1 * GB);
  std::atomic<bool> granted{false};
  std::thread t([&] {
    auto whole = ledger.reserve(300 * GB);
    EXPECT_DOUBLE_EQ(whole.bytes(), 100 * GB);  // clamped: it has all there is
    EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 100 * GB);
    granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  EXPECT_FALSE(granted);  // 1 GB held elsewhere: it waits for the device to be free
  small.release();
  t.join();
  EXPECT_TRUE(granted);
}

TEST(MemoryLedger, ASmallOnePassesAWaitingLargeOneWithinTheWindow) {
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto running = ledger.reserve(70 * GB);
  std::thread waiting([&] { auto r = ledger.reserve(60 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  fake_ms = 1000;                       // the large one has waited 1 s
  auto small = ledger.reserve(5 * GB);  // fits beside the running one: passes at once
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 75 * GB);
  small.release();
  running.release();
  waiting.join();
}

TEST(MemoryLedger, NothingPassesTheOldestWaiterOnceItsWindowHasClosed) {
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto running = ledger.reserve(70 * GB);
  std::atomic<bool> large_granted{false}, small_granted{false};
  std::thread large([&] {
    auto r = ledger.reserve(60 * GB);
    large_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  fake_ms = MemoryLedger::kPassingWindow.count() + 1;
  std::thread small([&] {
    auto r = ledger.reserve(5 * GB);
    small_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(small_granted);  // it would fit, but the large one has waited too long
  running.release();
  large.join();
  small.join();
  EXPECT_TRUE(large_granted);
  EXPECT_TRUE(small_granted);
}

TEST(MemoryLedger, AnUnlimitedLedgerNeverWaitsUntilSized) {
  MemoryLedger ledger;
  auto a = ledger.reserve(1e15);
  auto b = ledger.reserve(1e15);
  EXPECT_FALSE(a.held());  // nothing accounted
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 0);
  ledger.size_once(100 * GB);
  ledger.size_once(5 * GB);  // once only
  EXPECT_DOUBLE_EQ(ledger.capacity(), 100 * GB);
  auto c = ledger.reserve(60 * GB);
  EXPECT_TRUE(c.held());
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 60 * GB);
}

TEST(MemoryLedger, ATryIsGrantedNowOrRefusedNeverWaits) {
  MemoryLedger ledger(100 * GB);
  auto held = ledger.reserve(70 * GB);
  auto fits = ledger.try_reserve(30 * GB);
  ASSERT_TRUE(fits.has_value());
  EXPECT_TRUE(fits->held());
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 100 * GB);
  EXPECT_FALSE(ledger.try_reserve(1 * GB).has_value());  // full: refused at once
  fits.reset();
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 70 * GB);
  held.release();
  // More than the capacity is refused even on an empty ledger: a try is never the device alone.
  EXPECT_FALSE(ledger.try_reserve(101 * GB).has_value());
  EXPECT_EQ(ledger.waiting(), 0);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 0);
}

TEST(MemoryLedger, ATryDoesNotPassAWaiterWhoseWindowHasClosed) {
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto running = ledger.reserve(70 * GB);
  std::thread large([&] { auto r = ledger.reserve(60 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  EXPECT_TRUE(ledger.try_reserve(5 * GB).has_value());  // within the window: passes
  fake_ms = MemoryLedger::kPassingWindow.count() + 1;
  EXPECT_FALSE(ledger.try_reserve(5 * GB).has_value());  // the window has closed
  running.release();
  large.join();
}

TEST(MemoryLedger, AnUnlimitedLedgerGrantsEveryTry) {
  MemoryLedger ledger;
  auto a = ledger.try_reserve(1e15);
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->held());
}
