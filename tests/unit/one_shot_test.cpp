// The one-shot schedules on the same-host board as an algorithm
// (coll/one_shot.hpp on exec/board_executor.hpp), ranks as threads sharing
// one board: the allreduce on 1 to 9 ranks against the double reference
// (every case and count, the larger ones in many publications of a small
// board, so the two buffers turn over and over); a round that never
// blocks, and a call done in its first round that reads no clock; a peer
// that never comes, named with what it published; the argument check on
// the board naming both calls, and a peer that took recursive doubling.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithm_ranks.hpp"
#include "coll/one_shot.hpp"
#include "exec/algorithm.hpp"
#include "exec/board_executor.hpp"
#include "exec/wire.hpp"
#include "transport/loopback/loopback.hpp"
#include "transport/shm/board.hpp"

namespace rr {
namespace {

using namespace algorithm_ranks;  // NOLINT: the shared cases
using transport::shm::Board;
using Kind = coll::OneShot::Kind;

// 16 floats a publication: kCounts' larger counts take hundreds.
constexpr size_t kBoardBytes = 64;

// One board of `n` cells, and each rank's book of it and one-shot algorithm,
// on the transports of its own (as the communicator has them).
struct BoardRanks {
  explicit BoardRanks(int n) : fabric(std::make_shared<transport::LoopbackFabric>(n)) {
    EXPECT_TRUE(Board::create(n, kBoardBytes, &board).ok());
    for (int r = 0; r < n; ++r) {
      transports.push_back(std::make_unique<transport::LoopbackTransport>(fabric, r));
      books.push_back(std::make_unique<exec::BoardExecutor>(transports.back().get(), board.get(), r));
      algorithms.push_back(std::make_unique<coll::OneShot>(books.back().get(), n, true));
    }
  }
  std::shared_ptr<transport::LoopbackFabric> fabric;
  std::unique_ptr<Board> board;
  std::vector<std::unique_ptr<transport::LoopbackTransport>> transports;
  std::vector<std::unique_ptr<exec::BoardExecutor>> books;
  std::vector<std::unique_ptr<coll::OneShot>> algorithms;
};

// Runs rank r's prepared algorithm through drive, as the communicator does
// (the call's deadline from its first wait).
Status drive(BoardRanks& ranks, int r) {
  coll::OneShot& alg = *ranks.algorithms[static_cast<size_t>(r)];
  return exec::drive(alg, exec::named_by_the_algorithm(), alg.call(), ranks.transports[static_cast<size_t>(r)].get());
}

TEST(OneShotAlgorithm, AllreducesOnEveryRankCount) {
  // run_ranks makes each rank's algorithm on a transport of its own; the
  // board, made before each run, is shared (one process: every cell mapped once).
  std::unique_ptr<Board> board;
  std::vector<std::unique_ptr<exec::BoardExecutor>> books(9);
  check_allreduce<coll::OneShot>(
      [&](int r, int n, transport::Transport* t, memory::StagingPool*) {
        books[static_cast<size_t>(r)] = std::make_unique<exec::BoardExecutor>(t, board.get(), r);
        return std::make_unique<coll::OneShot>(books[static_cast<size_t>(r)].get(), n, true);
      },
      [](coll::OneShot& alg, const exec::Call& call) { alg.prepare(Kind::kAllreduce, call, wire::header_of(call)); },
      [&](int n) {
        for (auto& book : books) book.reset();
        board.reset();
        ASSERT_TRUE(Board::create(n, kBoardBytes, &board).ok());
      });
}

exec::Call timed_call(void* data, size_t count, std::chrono::milliseconds timeout) {
  exec::Call call = call_of(exec::Collective::kAllReduce, data, data, count, rrFloat32, rrSum);
  call.timeout = timeout;  // the deadline is left to the first wait
  return call;
}

// Prepares and posts an allreduce of `data` by `alg`, as drive() would.
void start_allreduce(coll::OneShot& alg, std::vector<float>* data) {
  const exec::Call call = timed_call(data->data(), data->size(), std::chrono::seconds(20));
  alg.prepare(Kind::kAllreduce, call, wire::header_of(call));
  ASSERT_TRUE(alg.post({}).ok());
}

TEST(OneShotAlgorithm, ARoundNeverBlocks) {
  BoardRanks ranks(2);
  std::vector<float> a(40, 1.0f), b(40, 2.0f);  // three publications of 16 floats
  coll::OneShot& one = *ranks.algorithms[1];
  start_allreduce(one, &b);
  // Rank 1 alone: it publishes its first piece, then its round returns,
  // waiting for rank 0's; it needs rank 0.
  exec::Round round;
  ASSERT_TRUE(one.progress({}, &round).ok());
  EXPECT_FALSE(round.done);
  int from = -2, to = -2;
  one.needs(&from, &to);
  EXPECT_EQ(from, 0);
  EXPECT_EQ(to, -1);
  // Rank 0's first piece finds rank 1's there; its second waits. Rounds of
  // either rank in turn finish both, rank 1 last: rank 0's last round
  // finds rank 1's last part there, so rank 0 is done within rounds too.
  coll::OneShot& zero = *ranks.algorithms[0];
  start_allreduce(zero, &a);
  exec::Round r0, r1;
  for (int i = 0; i < 100 && !(r0.done && r1.done); ++i) {
    if (!r0.done) {
      r0 = exec::Round{};
      ASSERT_TRUE(zero.progress({}, &r0).ok());
    }
    if (!r1.done) {
      r1 = exec::Round{};
      ASSERT_TRUE(one.progress({}, &r1).ok());
    }
  }
  ASSERT_TRUE(r0.done && r1.done);
  for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], 3.0f) << k;
  EXPECT_EQ(a, b);
}

TEST(OneShotAlgorithm, ACallDoneInItsFirstRoundReadsNoClock) {
  BoardRanks ranks(2);
  std::vector<float> a(4, 5.0f), b(4, 7.0f);
  const exec::Call call_a = timed_call(a.data(), a.size(), std::chrono::seconds(20));
  // Rank 1 publishes first; rank 0's drive then finds its part there.
  coll::OneShot& one = *ranks.algorithms[1];
  start_allreduce(one, &b);
  exec::Round round;
  ASSERT_TRUE(one.progress({}, &round).ok());
  ASSERT_FALSE(round.done);
  ranks.algorithms[0]->prepare(Kind::kAllreduce, call_a, wire::header_of(call_a));
  ASSERT_TRUE(drive(ranks, 0).ok());
  EXPECT_EQ(ranks.algorithms[0]->call().deadline, Clock::time_point{}) << "a deadline was made (a clock read)";
  ASSERT_TRUE(one.progress({}, &(round = exec::Round{})).ok());
  EXPECT_TRUE(round.done);
  EXPECT_EQ(a, std::vector<float>(4, 12.0f));
  EXPECT_EQ(b, std::vector<float>(4, 12.0f));
}

TEST(OneShotAlgorithm, ACallWhosePeerNeverComesTimesOutSayingWhatItPublished) {
  BoardRanks ranks(2);  // rank 1 never calls
  std::vector<float> a(4, 1.0f);
  const exec::Call call = timed_call(a.data(), a.size(), std::chrono::milliseconds(50));
  ranks.algorithms[0]->prepare(Kind::kAllreduce, call, wire::header_of(call));
  const Status s = drive(ranks, 0);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(s.message(),
            "allreduce #11 (one-shot) timed out: rank 0 waited for rank 1's part of the call (same-host "
            "shared-memory board: rank 1 has published 0 times, this rank 1)");
  EXPECT_NE(ranks.algorithms[0]->call().deadline, Clock::time_point{}) << "the wait made its deadline";
}

// Runs rank r's check (or announcement) of `call` on a thread each.
std::vector<Status> check_on_board(BoardRanks& ranks, const std::vector<exec::Call>& calls,
                                   const std::vector<Kind>& kinds) {
  std::vector<Status> results(calls.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < calls.size(); ++r) {
    threads.emplace_back([&, r] {
      ranks.algorithms[r]->prepare(kinds[r], calls[r], wire::header_of(calls[r]));
      results[r] = drive(ranks, static_cast<int>(r));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(OneShotAlgorithm, TheArgumentCheckNamesBothCalls) {
  BoardRanks ranks(3);
  std::vector<float> data(8);
  std::vector<exec::Call> calls(3, timed_call(data.data(), 8, std::chrono::seconds(2)));
  calls[2].count = 9;
  const std::vector<Status> results = check_on_board(ranks, calls, {Kind::kCheck, Kind::kCheck, Kind::kCheck});
  // Rank 2's neighbours (ranks 1 and 0) and rank 2 itself see the mismatch.
  for (int r = 0; r < 3; ++r) {
    const Status& s = results[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << r << ": " << s.message();
    EXPECT_NE(s.message().find("ranks called different collectives or passed different arguments"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("(count=8, dtype=float32, op=sum)"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 2 called allreduce #11 (count=9, dtype=float32, op=sum)"), std::string::npos)
        << s.message();
  }
}

TEST(OneShotAlgorithm, TheSameCallEverywherePassesItsCheckTurnAfterTurn) {
  BoardRanks ranks(4);
  std::vector<float> data(8);
  for (int turn = 0; turn < 5; ++turn) {
    std::vector<exec::Call> calls(4, timed_call(data.data(), 8, std::chrono::seconds(20)));
    for (exec::Call& call : calls) call.sequence = static_cast<uint64_t>(turn);
    for (const Status& s : check_on_board(ranks, calls, std::vector<Kind>(4, Kind::kCheck))) {
      EXPECT_TRUE(s.ok()) << turn << ": " << s.message();
    }
  }
}

// Rounds of `alg` until done, at most `rounds`: whether it finished.
bool run_rounds(coll::OneShot& alg, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    exec::Round round;
    if (!alg.progress({}, &round).ok()) return false;
    if (round.done) return true;
  }
  return false;
}

TEST(OneShotAlgorithm, ARankAheadWaitsForTheReadersOfTheBufferItReuses) {
  // Rank 3 publishes its check #0 and stops before reading (its left
  // neighbour, rank 2, has not published yet); ranks 0-2 finish theirs.
  // Rank 0 then announces #1 (read by nobody: it does not wait) and starts
  // #2, whose buffer held its #0, which rank 3 has not read: it must wait
  // for rank 3 (overwriting it would leave rank 3 waiting for a publication
  // that is gone: a hang).
  BoardRanks ranks(4);
  std::vector<float> data(8);
  auto start = [&](int r, Kind kind, uint64_t sequence) {
    exec::Call call = timed_call(data.data(), 8, std::chrono::seconds(20));
    call.sequence = sequence;
    coll::OneShot& alg = *ranks.algorithms[static_cast<size_t>(r)];
    alg.prepare(kind, call, wire::header_of(call));
    ASSERT_TRUE(alg.post({}).ok());
  };
  start(3, Kind::kCheck, 0);
  ASSERT_FALSE(run_rounds(*ranks.algorithms[3], 1));
  for (int r = 0; r < 3; ++r) start(r, Kind::kCheck, 0);
  // Each of them has both neighbours' #0 (rank 3's too) after a round of all.
  bool done[3] = {false, false, false};
  for (int pass = 0; pass < 2; ++pass) {
    for (int r = 0; r < 3; ++r) {
      if (!done[r]) done[r] = run_rounds(*ranks.algorithms[static_cast<size_t>(r)], 1);
    }
  }
  ASSERT_TRUE(done[0] && done[1] && done[2]);
  start(0, Kind::kAnnounce, 1);
  ASSERT_TRUE(run_rounds(*ranks.algorithms[0], 1));
  start(1, Kind::kAnnounce, 1);
  ASSERT_TRUE(run_rounds(*ranks.algorithms[1], 1));
  start(0, Kind::kCheck, 2);
  EXPECT_FALSE(run_rounds(*ranks.algorithms[0], 3));
  int from = -1, to = -1;
  ranks.algorithms[0]->needs(&from, &to);
  EXPECT_EQ(from, 3);
  EXPECT_NE(ranks.algorithms[0]->stalled({}, Code::kOk, -1, {}).message().find("waited for rank 3's previous publication"),
            std::string::npos);
  // Rank 3 reads its neighbours' #0 (rank 0's still there) and goes on.
  EXPECT_TRUE(run_rounds(*ranks.algorithms[3], 3));
  start(3, Kind::kAnnounce, 1);
  EXPECT_TRUE(run_rounds(*ranks.algorithms[3], 1));
  // Rank 0 publishes #2 now, and waits to read its neighbours' (rank 3's first).
  EXPECT_FALSE(run_rounds(*ranks.algorithms[0], 3));
  EXPECT_NE(ranks.algorithms[0]->stalled({}, Code::kOk, -1, {}).message().find("waited for rank 3's part of the call"),
            std::string::npos);
}

TEST(OneShotAlgorithm, ACheckAgainstAnAnnouncementNamesRecursiveDoubling) {
  BoardRanks ranks(2);
  std::vector<float> data(8);
  const std::vector<exec::Call> calls(2, timed_call(data.data(), 8, std::chrono::seconds(2)));
  const std::vector<Status> results = check_on_board(ranks, calls, {Kind::kCheck, Kind::kAnnounce});
  EXPECT_EQ(results[0].code(), Code::kInvalidUsage) << results[0].message();
  EXPECT_NE(results[0].message().find("rank 1 took recursive doubling for this call"), std::string::npos)
      << results[0].message();
  EXPECT_TRUE(results[1].ok()) << results[1].message();  // nobody reads an announcement: it does not wait
}

}  // namespace
}  // namespace rr
