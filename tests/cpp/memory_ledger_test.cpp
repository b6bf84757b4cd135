#include "eval/memory_ledger.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
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

TEST(MemoryLedger, OnceItsWindowHasClosedOnlyWhatLeavesTheOldestWaiterItsRoomPasses) {
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto running = ledger.reserve(30 * GB);
  std::atomic<bool> large_granted{false}, second_granted{false};
  std::thread large([&] {
    auto r = ledger.reserve(80 * GB);  // 110 with the running one: waits
    large_granted = true;
    EXPECT_TRUE(eventually([&] { return second_granted.load(); }));
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  fake_ms = MemoryLedger::kPassingWindow.count() + 1;
  // 15 GB beside the running one, and beside the large one once the running one has gone: passes.
  auto first = ledger.reserve(15 * GB);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 45 * GB);
  // 10 GB more fits now (55) but would leave the large one 75: it waits.
  std::thread second([&] {
    auto r = ledger.reserve(10 * GB);
    second_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(second_granted);
  // The large one is admitted as soon as the reservation it found has gone, beside the one that
  // passed it: passing never delays it.
  running.release();
  ASSERT_TRUE(eventually([&] { return large_granted.load(); }));
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 95 * GB);
  EXPECT_FALSE(second_granted);
  first.release();  // 80 + 10 fits: the second is admitted beside the large one
  large.join();
  second.join();
  EXPECT_TRUE(second_granted);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 0);
}

TEST(MemoryLedger, NothingPassesAnOldestWaiterThatNeedsTheWholeDeviceOnceItsWindowHasClosed) {
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto running = ledger.reserve(70 * GB);
  std::atomic<bool> whole_granted{false}, small_granted{false};
  std::thread whole([&] {
    auto r = ledger.reserve(300 * GB);
    whole_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  fake_ms = MemoryLedger::kPassingWindow.count() + 1;
  std::thread small([&] {
    auto r = ledger.reserve(5 * GB);
    small_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(small_granted);  // it would fit, but the device is promised to the whole one
  running.release();
  whole.join();
  small.join();
  EXPECT_TRUE(whole_granted);
  EXPECT_TRUE(small_granted);
}

TEST(MemoryLedger, TheNextOldestWaiterCountsAsPassedOnlyWhatIsAdmittedAfterItBecameOldest) {
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto running = ledger.reserve(60 * GB);
  std::atomic<bool> first_granted{false};
  MemoryLedger::Reservation first_held;
  std::thread first([&] {
    first_held = ledger.reserve(50 * GB);
    first_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  std::thread second([&] { auto r = ledger.reserve(60 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));
  fake_ms = MemoryLedger::kPassingWindow.count() + 1;
  running.release();
  first.join();  // the first runs; the second (110 with it) is now the oldest waiter
  ASSERT_TRUE(first_granted);
  EXPECT_EQ(ledger.waiting(), 1);
  // The first was admitted before the second became the oldest: it is what the second waits
  // for, not a reservation that passed it, so 30 GB beside both passes.
  auto small = ledger.try_reserve(30 * GB);
  EXPECT_TRUE(small.has_value());
  EXPECT_FALSE(ledger.try_reserve(15 * GB).has_value());  // fits (95), but leaves the second 55
  small.reset();
  first_held.release();
  second.join();
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

TEST(MemoryLedger, ATryTakesNoRoomOfAWaiterWhoseWindowHasClosed) {
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto running = ledger.reserve(30 * GB);
  std::thread large([&] { auto r = ledger.reserve(80 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  auto within = ledger.try_reserve(25 * GB);  // within the window anything that fits passes
  EXPECT_TRUE(within.has_value());
  within.reset();
  fake_ms = MemoryLedger::kPassingWindow.count() + 1;
  EXPECT_FALSE(ledger.try_reserve(25 * GB).has_value());  // would leave the large one 75
  auto beside = ledger.try_reserve(20 * GB);              // leaves it its 80
  EXPECT_TRUE(beside.has_value());
  beside.reset();
  running.release();
  large.join();
}

TEST(MemoryLedger, AnUnlimitedLedgerGrantsEveryTry) {
  MemoryLedger ledger;
  auto a = ledger.try_reserve(1e15);
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->held());
}

// An evaluation whose first draw measured more than it reserved keeps what it holds while it
// waits for the rest: its drawn cases use that memory (session 31's H100 audit: given back and
// waited for anew, a matmul's drawn cases were in no one's account, and three evaluations that took
// the whole ledger meanwhile ran out of device memory).
// 40 GB held and 30 more asked, beside the 50 GB another evaluation holds, in a ledger of 100:
// the growth waits (its thread, `grower`, started here; `mine` is read once it has joined).
class MemoryLedgerGrowth : public ::testing::Test {
 protected:
  void SetUp() override {
    grower = std::thread([&] { grown = ledger.grow(mine, 30 * GB); });
    ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  }
  void TearDown() override {
    other.release();  // (where a test stopped early: the growth then ends)
    if (grower.joinable()) grower.join();
  }

  MemoryLedger ledger{100 * GB};
  MemoryLedger::Reservation mine = ledger.reserve(40 * GB);
  MemoryLedger::Reservation other = ledger.reserve(50 * GB);
  std::atomic<bool> grown{false};
  std::thread grower;
};

TEST_F(MemoryLedgerGrowth, WaitsBesideWhatItHolds) {
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(grown);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 90 * GB);  // what it holds stays accounted
  other.release();
  grower.join();
  EXPECT_TRUE(grown);
  EXPECT_DOUBLE_EQ(mine.bytes(), 70 * GB);  // grown in place: one reservation
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 70 * GB);
  EXPECT_EQ(ledger.waiting(), 0);
  mine.release();
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 0);  // given back whole
}

TEST_F(MemoryLedgerGrowth, NothingPassesItThatWouldNotLeaveItItsRoom) {
  // 10 GB fit now, but would leave the growth 0 of its 30 once `other` goes: it waits, even
  // within the passing window, and a try is refused.
  EXPECT_FALSE(ledger.try_reserve(10 * GB).has_value());
  std::atomic<bool> small_granted{false};
  std::thread small([&] {
    auto r = ledger.reserve(10 * GB);
    // Once `other` has gone both fit, and either may be admitted first (whichever thread wakes
    // first): the small one leaves the growth its 30, whether that is granted yet or not.
    // (Reserved read first: a growth granted between the two reads then counts once.)
    const double reserved = ledger.reserved_bytes();
    const double growth_to_come = ledger.waiting() > 0 ? 30 * GB : 0.0;
    EXPECT_LE(reserved + growth_to_come, 100 * GB);
    small_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(small_granted);
  other.release();
  grower.join();
  small.join();
  EXPECT_TRUE(small_granted);
  EXPECT_DOUBLE_EQ(mine.bytes(), 70 * GB);
}

TEST(MemoryLedger, AGrowthGoesBeforeAWaiterThatHoldsNothing) {
  // 40 + 50 held; a 60 GB reservation waits, then a growth of the 40 by 50, and the passing
  // window closes. Once the 50 go, either fits alone (40 + 60, or 90), not both: the growth is
  // granted first and the 60 waits for what it holds. (Behind the 60, the growth could not pass
  // it: 50 + 60 would not leave it its room.)
  MemoryLedger ledger(100 * GB);
  ledger.set_clock_for_testing(&fake_now);
  fake_ms = 0;
  auto mine = ledger.reserve(40 * GB);
  auto other = ledger.reserve(50 * GB);
  std::atomic<bool> large_granted{false};
  std::thread large([&] {
    auto r = ledger.reserve(60 * GB);
    large_granted = true;
  });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  std::atomic<bool> grown{false};
  std::thread grower([&] { grown = ledger.grow(mine, 50 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));
  fake_ms = MemoryLedger::kPassingWindow.count() + 1;
  other.release();
  ASSERT_TRUE(eventually([&] { return grown.load(); }));
  grower.join();
  EXPECT_DOUBLE_EQ(mine.bytes(), 90 * GB);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(large_granted);  // 90 GB held by the grown evaluation: it waits
  mine.release();
  large.join();
  EXPECT_TRUE(large_granted);
}

TEST(MemoryLedger, AGrowthAtOnceLeavesTheGrowthWaitingItsRoom) {
  // 30 + 30 + 30 held; the first asks 30 more and waits. The second's 5 more fit now (95), but
  // would leave the first 0 of its 30 once the third goes: it waits behind it, and both are
  // granted in turn once the third has gone.
  MemoryLedger ledger(100 * GB);
  auto a = ledger.reserve(30 * GB);
  auto b = ledger.reserve(30 * GB);
  auto third = ledger.reserve(30 * GB);
  std::atomic<bool> a_grown{false};
  std::atomic<bool> b_grown{false};
  std::thread ta([&] { a_grown = ledger.grow(a, 30 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  std::thread tb([&] { b_grown = ledger.grow(b, 5 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(b_grown);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 90 * GB);
  third.release();
  ta.join();
  tb.join();
  EXPECT_TRUE(a_grown && b_grown);
  EXPECT_DOUBLE_EQ(a.bytes(), 60 * GB);
  EXPECT_DOUBLE_EQ(b.bytes(), 35 * GB);
}

TEST(MemoryLedger, ASecondGrowthIsRefusedAtOnceWhereBothCouldNotFinish) {
  MemoryLedger ledger(100 * GB);
  auto a = ledger.reserve(45 * GB);
  auto b = ledger.reserve(45 * GB);
  std::atomic<bool> a_grown{false};
  std::thread t([&] { a_grown = ledger.grow(a, 50 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  // Each holding what the other waits for would wait forever: the second is told at once, and
  // what it holds is as it was. (Asked on a thread of its own: a growth that waited instead would
  // hang the test, so it ends the process with the reason.)
  std::promise<bool> answer;
  auto answered = answer.get_future();
  std::thread([&ledger, &b, answer = std::move(answer)]() mutable {
    answer.set_value(ledger.grow(b, 50 * GB));
  }).detach();
  if (answered.wait_for(5s) != std::future_status::ready) {
    std::fprintf(stderr, "the second growth waited: the two would wait forever\n");
    std::abort();
  }
  EXPECT_FALSE(answered.get());
  EXPECT_DOUBLE_EQ(b.bytes(), 45 * GB);
  EXPECT_EQ(ledger.waiting(), 1);
  b.release();  // what its caller then does: gives back and waits anew (reserve)
  t.join();
  EXPECT_TRUE(a_grown);
  EXPECT_DOUBLE_EQ(a.bytes(), 95 * GB);
}

TEST(MemoryLedger, GrowthsThatCanFinishInTurnWaitTogether) {
  // 20 + 20 held by two evaluations that want 30 and 60 more, beside 60 held by a third: once
  // the third has gone the first gets its 30 (70 held), and once it has finished the second gets
  // its 60. Neither is refused: they can be granted in turn.
  MemoryLedger ledger(100 * GB);
  auto a = ledger.reserve(20 * GB);
  auto b = ledger.reserve(20 * GB);
  auto third = ledger.reserve(60 * GB);
  std::atomic<bool> a_grown{false};
  std::atomic<bool> b_grown{false};
  std::thread ta([&] { a_grown = ledger.grow(a, 30 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 1; }));
  std::thread tb([&] { b_grown = ledger.grow(b, 60 * GB); });
  ASSERT_TRUE(eventually([&] { return ledger.waiting() == 2; }));  // waits: not refused
  third.release();
  ASSERT_TRUE(eventually([&] { return a_grown.load(); }));
  ta.join();
  EXPECT_DOUBLE_EQ(a.bytes(), 50 * GB);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(b_grown);  // 70 held: its 60 wait for the first to finish
  a.release();
  tb.join();
  EXPECT_TRUE(b_grown);
  EXPECT_DOUBLE_EQ(b.bytes(), 80 * GB);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 80 * GB);
  EXPECT_EQ(ledger.waiting(), 0);
}

TEST(MemoryLedger, AGrowthIsClampedToTheCapacityAndNeedsAReservationOfItsLedger) {
  MemoryLedger ledger(100 * GB);
  auto mine = ledger.reserve(60 * GB);
  EXPECT_TRUE(ledger.grow(mine, 300 * GB));  // nothing else held: granted at once, clamped
  EXPECT_DOUBLE_EQ(mine.bytes(), 100 * GB);
  EXPECT_DOUBLE_EQ(ledger.reserved_bytes(), 100 * GB);
  MemoryLedger elsewhere(100 * GB);
  auto foreign = elsewhere.reserve(10 * GB);
  EXPECT_FALSE(ledger.grow(foreign, 1 * GB));
  MemoryLedger::Reservation none;
  EXPECT_FALSE(ledger.grow(none, 1 * GB));
  EXPECT_DOUBLE_EQ(foreign.bytes(), 10 * GB);
}
