// The one loop that runs an algorithm (exec::drive, exec/algorithm.hpp), with
// a scripted algorithm: it ends when the algorithm does, returns a failed
// post or round (cancelling what the round left), and ends a still call on
// its deadline, an interrupt or a dead peer, naming what it waited on; a
// batch sees a dead peer behind a live silent one, and with
// post_past_lost_peers sends to the live peers past a known-dead one. Then
// the algorithms on batches (coll/: recursive doubling, halving-doubling, the
// binomial trees) on 1 to 9 ranks as threads of the loopback transport,
// against a double-precision reference: counts that do not divide, one
// element, none, in place and out of place, pieces smaller than the buffer.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algorithm_ranks.hpp"
#include "coll/binomial_tree.hpp"
#include "coll/halving_doubling.hpp"
#include "coll/recursive_doubling.hpp"
#include "exec/algorithm.hpp"
#include "exec/batch.hpp"
#include "exec/wait_policy.hpp"
#include "exec/wire.hpp"
#include "memory/staging_pool.hpp"
#include "transport/loopback/loopback.hpp"

namespace rr {
namespace {

using namespace algorithm_ranks;  // NOLINT: the shared cases

using Clock = std::chrono::steady_clock;

class Interrupted final : public exec::Interrupt {
 public:
  Status check() override {
    checked = true;
    return fire ? InvalidUsage("the communicator was aborted (rrCommAbort)") : Status::Ok();
  }
  bool fire = false;
  bool checked = false;
};

// Finishes after `rounds_to_finish` rounds (never when negative), or fails
// its post or round `fail_round` as told; waits to receive from rank 1;
// counts what drive() asked of it.
class Scripted final : public exec::Algorithm {
 public:
  Status post(const std::string&) override {
    ++posts;
    return fail_post;
  }
  Status progress(const std::string& what, exec::Round* round) override {
    ++rounds;
    round->done = rounds == rounds_to_finish || (done_once_checked && done_once_checked->checked);
    round->moved = moves;
    round->transport_moved = transport_moves;
    if (rounds == fail_round) return RemoteError(what + ": the peer sent garbage");
    return Status::Ok();
  }
  void needs(int* from, int* to) const override {
    *from = 1;
    *to = -1;
  }
  Status stalled(const std::string& what, Code code, int failed_peer, const std::string& cause) const override {
    ++stalls;
    const std::string where = what + ": rank 0 waited to receive 64 bytes from rank 1";
    if (code == Code::kTimeout) return Timeout(where + " (step 2 of 3)");
    return Status(code, where + (failed_peer >= 0 ? " (rank " + std::to_string(failed_peer) + " gone)" : "") +
                            ": " + cause);
  }
  void cancel() override { ++cancels; }

  int rounds_to_finish = -1;
  const Interrupted* done_once_checked = nullptr;  // finishes in the first round after the interrupt was looked at
  int fail_round = -1;
  bool moves = false;
  bool transport_moves = false;
  Status fail_post;
  int posts = 0, rounds = 0, cancels = 0;
  mutable int stalls = 0;
};


struct Drive : ::testing::Test {
  std::shared_ptr<transport::LoopbackFabric> fabric = std::make_shared<transport::LoopbackFabric>(2);
  transport::LoopbackTransport transport{fabric, 0};
  Scripted algorithm;
  const std::string what = "allreduce #3";
  Status run(std::chrono::milliseconds timeout, exec::Interrupt* interrupt = nullptr) {
    return exec::drive(algorithm, what, Clock::now() + timeout, interrupt, &transport);
  }
};

TEST_F(Drive, EndsWhenTheAlgorithmDoes) {
  algorithm.rounds_to_finish = 5;
  ASSERT_TRUE(run(std::chrono::seconds(10)).ok());
  EXPECT_EQ(algorithm.posts, 1);
  EXPECT_EQ(algorithm.rounds, 5);
  EXPECT_EQ(algorithm.cancels, 0);
}

TEST_F(Drive, AFailedPostIsReturnedAndNothingRuns) {
  algorithm.fail_post = SystemError("allreduce #3: out of registered memory");
  const Status s = run(std::chrono::seconds(10));
  EXPECT_EQ(s.code(), Code::kSystemError);
  EXPECT_EQ(s.message(), "allreduce #3: out of registered memory");
  EXPECT_EQ(algorithm.rounds, 0);
  EXPECT_EQ(algorithm.cancels, 0) << "a failed post leaves nothing in flight";
}

TEST_F(Drive, AFailedRoundIsReturnedAndCancelled) {
  algorithm.fail_round = 3;
  algorithm.moves = true;
  const Status s = run(std::chrono::seconds(10));
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_EQ(s.message(), "allreduce #3: the peer sent garbage");
  EXPECT_EQ(algorithm.rounds, 3);
  EXPECT_EQ(algorithm.cancels, 1);
}

TEST_F(Drive, AStillCallTimesOutNamingWhatItWaitedOn) {
  const auto start = Clock::now();
  const Status s = run(std::chrono::milliseconds(60));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(s.message(), "allreduce #3: rank 0 waited to receive 64 bytes from rank 1 (step 2 of 3)");
  EXPECT_EQ(algorithm.cancels, 1);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST_F(Drive, ACallThatMovesIsNotTimedOutWhileItMoves) {
  // Moving rounds skip the checks; the deadline is looked at after a still one.
  algorithm.moves = true;
  algorithm.rounds_to_finish = 200000;
  EXPECT_TRUE(run(std::chrono::seconds(30)).ok());
  EXPECT_EQ(algorithm.stalls, 0);
}

TEST_F(Drive, ATransportThatMovesDoesNotHideTheDeadline) {
  // Keepalives, wire-up, another call's traffic: the call itself is still.
  algorithm.transport_moves = true;
  algorithm.rounds_to_finish = 20000000;  // seconds away: a loop that took the transport's moves for the call's ends OK
  const Status s = run(std::chrono::milliseconds(60));
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  EXPECT_EQ(algorithm.cancels, 1);
}

TEST_F(Drive, AnInterruptEndsAStillCall) {
  Interrupted interrupt;
  interrupt.fire = true;
  const Status s = run(std::chrono::seconds(30), &interrupt);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(),
            "allreduce #3: rank 0 waited to receive 64 bytes from rank 1: the communicator was aborted (rrCommAbort)");
  EXPECT_EQ(algorithm.cancels, 1);
}

TEST_F(Drive, ACallThatCompletesAsItsWaitEndsIsNotFailed) {
  // What ended the wait (here an abort) came while the call's last part
  // arrived: one more round takes it, and the call completes.
  Interrupted interrupt;
  interrupt.fire = true;
  algorithm.done_once_checked = &interrupt;
  EXPECT_TRUE(run(std::chrono::seconds(30), &interrupt).ok());
  EXPECT_EQ(algorithm.cancels, 0);
  EXPECT_EQ(algorithm.stalls, 0);
}

TEST_F(Drive, ADeadPeerEndsAStillCall) {
  fabric->fail_rank(1);
  const Status s = run(std::chrono::seconds(30));
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_EQ(s.message(), "allreduce #3: rank 0 waited to receive 64 bytes from rank 1 (rank 1 gone): rank 1 has failed")
      << s.message();
  EXPECT_EQ(algorithm.cancels, 1);
}

TEST(BatchPoll, APeerSeenGoneIsFailedByALaterPoll) {
  // rrGroupEnd over several communicators polls each batch in turn: the
  // loss of a peer, seen twice (the transport may show it before what the
  // peer sent last), must carry from one poll to the next.
  auto fabric = std::make_shared<transport::LoopbackFabric>(2);
  transport::LoopbackTransport transport(fabric, 0);
  exec::Batch batch(&transport);
  uint8_t byte = 0;
  batch.add_recv(1, 7, &byte, 1);
  const std::string what = "group of 1 sends and receives";
  ASSERT_TRUE(batch.post(what).ok());
  fabric->fail_rank(1);
  Status s;
  bool finished = false;
  for (int polls = 0; polls < 1000 && s.ok() && !finished; ++polls) {
    s = batch.poll(what, Clock::now() + std::chrono::seconds(60), nullptr, &finished);
  }
  EXPECT_FALSE(finished);
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_EQ(s.message(), "group of 1 sends and receives: rank 0 waited to receive 1 bytes from rank 1: rank 1 has failed");
}

TEST(Batch, ADeadPeerBehindALiveSilentOneIsSeen) {
  // A batch waits on several peers at once: rank 1 is alive but sends
  // nothing (it waits on someone too), rank 2 died. The batch must name
  // rank 2, not wait out its deadline on rank 1.
  auto fabric = std::make_shared<transport::LoopbackFabric>(3);
  transport::LoopbackTransport transport(fabric, 0);
  exec::Batch batch(&transport);
  uint8_t from1 = 0, from2 = 0;
  batch.add_recv(1, 7, &from1, 1);
  batch.add_recv(2, 7, &from2, 1);
  fabric->fail_rank(2);
  const Status s = batch.run("exchange", Clock::now() + std::chrono::seconds(3));
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_EQ(s.message(), "exchange: rank 0 waited to receive 1 bytes from rank 2: rank 2 has failed");
}

TEST(Batch, SendsPastALostPeerStillReachTheLiveOnes) {
  // Rank 0 sends to rank 1 (dead, known) and then rank 2: by default the
  // post fails at rank 1 and rank 2 gets nothing; with post_past_lost_peers
  // rank 2 gets its message and the batch fails naming rank 1.
  for (bool past : {false, true}) {
    SCOPED_TRACE(past ? "post_past_lost_peers" : "default");
    auto fabric = std::make_shared<transport::LoopbackFabric>(3);
    transport::LoopbackTransport rank0(fabric, 0), rank2(fabric, 2);
    fabric->fail_rank(1);
    exec::Batch batch(&rank0);
    if (past) batch.post_past_lost_peers();
    const uint8_t word = 42;
    batch.add_send(1, 7, &word, 1);
    batch.add_send(2, 7, &word, 1);
    const Status s = batch.run("leave", Clock::now() + std::chrono::seconds(3));
    EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
    uint8_t got = 0;
    transport::Completion done;
    ASSERT_TRUE(rank2.post_recv(0, 7, &got, 1, &done).ok());
    for (int i = 0; i < 100 && !done.done; ++i) rank2.progress();
    EXPECT_EQ(done.done, past);
    EXPECT_EQ(got, past ? word : 0);
    if (!done.done) rank2.cancel(&done);
  }
}

// ---------------------------------------------------------------------------
// The algorithms on batches, N ranks as threads (algorithm_ranks.hpp).

TEST(RecursiveDoublingAlgorithm, AllreducesOnEveryRankCount) {
  check_allreduce<coll::RecursiveDoubling>(
      [](int r, int n, transport::Transport* t, memory::StagingPool* p) {
        return std::make_unique<coll::RecursiveDoubling>(t, p, r, n, true);
      },
      [](coll::RecursiveDoubling& alg, const exec::Call& call) { alg.prepare(call, wire::header_of(call)); });
}

TEST(RecursiveDoublingAlgorithm, ACallWhosePeerNeverComesTimesOutSayingWhere) {
  auto fabric = std::make_shared<transport::LoopbackFabric>(2);
  transport::LoopbackTransport transport(fabric, 0);  // rank 1 never calls
  memory::StagingPool pool;
  ASSERT_TRUE(pool.reserve(kSlotBytes, kSlots).ok());
  coll::RecursiveDoubling rd(&transport, &pool, 0, 2, true);
  std::vector<float> data(10, 1.0f);
  const exec::Call call = call_of(exec::Collective::kAllReduce, data.data(), data.data(), 10, rrFloat32, rrSum);
  rd.prepare(call, wire::header_of(call));
  const Status s = exec::drive(rd, "allreduce #11 (recursive doubling)", Clock::now() + std::chrono::milliseconds(50),
                               nullptr, &transport);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(s.message(),
            "allreduce #11 (recursive doubling): rank 0 waited to receive up to " + std::to_string(pool.slot_bytes()) +
                " bytes from rank 1 (piece 1 of 1, step 1 of 1, 1 of 2 transfers done)");
}

TEST(HalvingDoublingAlgorithm, AllreducesOnEveryRankCount) {
  check_allreduce<coll::HalvingDoubling>(
      [](int r, int n, transport::Transport* t, memory::StagingPool* p) {
        return std::make_unique<coll::HalvingDoubling>(t, p, r, n);
      },
      [](coll::HalvingDoubling& alg, const exec::Call& call) { alg.prepare(call); });
}

TEST(RecursiveDoublingAlgorithm, RanksThatPassDifferentArgumentsFailNamingBothCalls) {
  std::vector<float> a(10, 1.0f), b(10, 1.0f);
  const std::vector<Status> results = run_ranks<coll::RecursiveDoubling>(
      2,
      [](int r, transport::Transport* t, memory::StagingPool* p) {
        return std::make_unique<coll::RecursiveDoubling>(t, p, r, 2, true);
      },
      [&](int r, coll::RecursiveDoubling& alg) {
        const exec::Call call = call_of(exec::Collective::kAllReduce, (r ? &b : &a)->data(), (r ? &b : &a)->data(),
                                        10, rrFloat32, r == 0 ? rrSum : rrMax);
        alg.prepare(call, wire::header_of(call));
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)].code(), Code::kInvalidUsage) << results[static_cast<size_t>(r)].message();
    EXPECT_NE(results[static_cast<size_t>(r)].message().find("ranks called different collectives or passed different "
                                                             "arguments"),
              std::string::npos)
        << results[static_cast<size_t>(r)].message();
  }
}

TEST(BinomialTreeAlgorithm, BroadcastsAndReducesFromEveryRoot) {
  for (int n = 1; n <= 9; ++n) {
    for (int root = 0; root < n; ++root) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100}}) {
        for (const Case& c : kCases) {
          for (bool reducing : {false, true}) {
            Inputs data(n, count, c.dtype);
            std::vector<std::vector<double>>& values = data.values;
            std::vector<Buffer>& in = data.in;
            std::vector<Buffer>& out = data.out;
            const std::vector<Status> results = run_ranks<coll::BinomialTree>(
                n,
                [n](int r, transport::Transport* t, memory::StagingPool* p) {
                  return std::make_unique<coll::BinomialTree>(t, p, r, n);
                },
                [&](int r, coll::BinomialTree& alg) {
                  alg.prepare(call_of(reducing ? exec::Collective::kReduce : exec::Collective::kBroadcast,
                                      in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(), count,
                                      c.dtype, c.op, root));
                });
            const std::string at = where(n, count, c, false) + ", root " + std::to_string(root) +
                                   (reducing ? ", reduce" : ", broadcast");
            for (int r = 0; r < n; ++r) ASSERT_TRUE(results[static_cast<size_t>(r)].ok()) << at;
            for (size_t k = 0; k < count; ++k) {
              const double want = reducing ? reduced(values, k, c.op) : values[static_cast<size_t>(root)][k];
              for (int r = 0; r < n; ++r) {
                if (reducing && r != root) continue;  // only the root's output is the call's
                ASSERT_NEAR(out[static_cast<size_t>(r)].at(k), want, 1e-4 * (1.0 + std::fabs(want)))
                    << at << ", rank " << r << ", element " << k;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rr
