// How a rank with nothing to do waits (exec/wait_policy.hpp): when each mode
// spins, yields and sleeps, and on what; a peer seen gone fails the wait at
// the second look, however the transport moved between them.
#include "exec/wait_policy.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "transport/loopback/loopback.hpp"

namespace rr::exec {
namespace {

using Clock = WaitPolicy::Clock;

// Counts the sleeps; sleeps not at all. The transport is never touched
// while a sleeper is given (a wait that reached for it would crash: the
// tests pass none).
class CountingSleeper final : public Sleeper {
 public:
  void sleep(int timeout_ms) override {
    ++calls;
    last_timeout_ms = timeout_ms;
  }
  int calls = 0;
  int last_timeout_ms = 0;
};

Clock::time_point far_deadline() { return Clock::now() + std::chrono::hours(1); }

// Idle rounds until the first sleep (at most `limit`).
int rounds_to_first_sleep(WaitPolicy& wait, const CountingSleeper& sleeper, int limit) {
  int rounds = 0;
  while (sleeper.calls == 0 && rounds < limit) {
    wait.idle();
    ++rounds;
  }
  return rounds;
}

TEST(WaitPolicy, SleepSpinsThenYieldsThenSleepsOnTheSleeper) {
  CountingSleeper sleeper;
  WaitPolicy wait(nullptr, far_deadline(), nullptr, &sleeper, WaitMode::kSleep);
  EXPECT_EQ(rounds_to_first_sleep(wait, sleeper, 1000), 128) << "64 spinning rounds, 64 yielding, then sleep";
  EXPECT_GT(sleeper.last_timeout_ms, 0) << "bounded, so that the deadline is looked at";
  wait.idle();
  EXPECT_EQ(sleeper.calls, 2) << "past them, every idle round sleeps";
}

TEST(WaitPolicy, SomethingMovingStartsTheRoundsOver) {
  CountingSleeper sleeper;
  WaitPolicy wait(nullptr, far_deadline(), nullptr, &sleeper, WaitMode::kSleep);
  ASSERT_EQ(rounds_to_first_sleep(wait, sleeper, 1000), 128);
  wait.reset();
  sleeper.calls = 0;
  EXPECT_EQ(rounds_to_first_sleep(wait, sleeper, 1000), 128);
}

TEST(WaitPolicy, ACallerThatSpunSkipsTheSpinningRounds) {
  // The board's first look polls a flag as long as the spin would last
  // (exec/board_executor.hpp): the wait goes on from the yielding rounds.
  CountingSleeper sleeper;
  WaitPolicy wait(nullptr, far_deadline(), nullptr, &sleeper, WaitMode::kSleep);
  wait.spun();
  EXPECT_EQ(rounds_to_first_sleep(wait, sleeper, 1000), 64) << "64 yielding rounds, then sleep";
  wait.reset();
  sleeper.calls = 0;
  for (int i = 0; i < 10; ++i) wait.idle();
  wait.spun();  // past 10 spinning rounds: the rest of the 64 are skipped
  EXPECT_EQ(rounds_to_first_sleep(wait, sleeper, 1000), 64);
  wait.spun();  // past the spin already: nothing changes, the next round sleeps
  sleeper.calls = 0;
  EXPECT_EQ(rounds_to_first_sleep(wait, sleeper, 1000), 1);
}

TEST(WaitPolicy, YieldNeverSleeps) {
  // With more ranks than cores the core goes to the rank with work, round
  // after round: sleeping there cost 2x per small call (the header says).
  CountingSleeper sleeper;
  WaitPolicy wait(nullptr, far_deadline(), nullptr, &sleeper, WaitMode::kYield);
  EXPECT_EQ(rounds_to_first_sleep(wait, sleeper, 20000), 20000);
  WaitPolicy without_sleeper(nullptr, far_deadline(), nullptr, nullptr, WaitMode::kYield);
  for (int i = 0; i < 20000; ++i) without_sleeper.idle();  // a sleep would reach the null transport
}

TEST(WaitPolicy, SpinNeverSleeps) {
  CountingSleeper sleeper;
  WaitPolicy wait(nullptr, far_deadline(), nullptr, &sleeper, WaitMode::kSpin);
  EXPECT_EQ(rounds_to_first_sleep(wait, sleeper, 20000), 20000);
}

TEST(WaitPolicy, ChecksComeEverySixteenthSpinningRoundThenEveryRound) {
  WaitPolicy wait(nullptr, far_deadline(), nullptr, nullptr, WaitMode::kSpin);
  int due = 0;
  for (int round = 0; round < 64; ++round) {
    due += wait.checks_due() ? 1 : 0;
    wait.idle();
  }
  EXPECT_EQ(due, 4);
  EXPECT_TRUE(wait.checks_due());
}

TEST(WaitPolicy, APeerSeenGoneStaysSeenWhileOnlyTheTransportMoves) {
  // A batch names its pending peers in turn: live rank 1, dead rank 2,
  // rank 1, rank 2... with the transport moving at every look (keepalives,
  // other traffic). The second look at rank 2 must fail the wait; had the
  // transport's moves made it forget the first, it never would.
  auto fabric = std::make_shared<transport::LoopbackFabric>(3);
  transport::LoopbackTransport transport(fabric, 0);
  fabric->fail_rank(2);
  WaitPolicy wait(&transport, far_deadline(), nullptr, nullptr, WaitMode::kSpin);
  int failed_peer = -1;
  Status s;
  int looks = 0;
  for (; looks < 8 && s.ok(); ++looks) {
    s = wait.after_still_round(looks % 2 == 0 ? 1 : 2, -1, /*transport_moved=*/true, &failed_peer);
  }
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_EQ(failed_peer, 2);
  EXPECT_EQ(looks, 4) << "the second look at rank 2";
  // The call itself moving (a transfer completed) does start the looks over.
  WaitPolicy again(&transport, far_deadline(), nullptr, nullptr, WaitMode::kSpin);
  EXPECT_TRUE(again.after_still_round(2, -1, false, &failed_peer).ok());
  again.reset();
  EXPECT_TRUE(again.after_still_round(2, -1, false, &failed_peer).ok());
  EXPECT_FALSE(again.after_still_round(2, -1, false, &failed_peer).ok());
}

TEST(WaitPolicy, TheModesByName) {
  WaitMode mode = WaitMode::kAuto;
  for (WaitMode m : {WaitMode::kAuto, WaitMode::kSleep, WaitMode::kYield, WaitMode::kSpin}) {
    ASSERT_TRUE(parse_wait_mode(wait_mode_name(m), &mode));
    EXPECT_EQ(mode, m);
  }
  EXPECT_FALSE(parse_wait_mode("nap", &mode));
}

}  // namespace
}  // namespace rr::exec
