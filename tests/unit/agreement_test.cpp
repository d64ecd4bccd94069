// coll/agreement.hpp on the loopback transport, ranks as threads: the
// survivors decide one set of failed ranks whatever the order of events.
// Ranks dead before the agreement (known to some survivors, discovered by
// the others) and ranks that crash in the middle of it (after a random
// number of their sends: part of a round's broadcast, or part of the
// "decided" message's) are mixed at random over 2 to 9 ranks; every
// survivor must decide, all the same set, holding every rank dead before
// and no survivor. A rank the transport cannot reach counts at once; a
// rank silent for the limit is counted as failed and named; a message of
// another round or size is refused by name.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coll/agreement.hpp"
#include "exec/algorithm.hpp"
#include "exec/tags.hpp"
#include "transport/loopback/loopback.hpp"

namespace rr {
namespace {

using namespace std::chrono_literals;

// A loopback rank that crashes at its `limit`-th send: that send and every
// later one never leave, and its peers see it failed from then on.
class CrashingTransport final : public transport::Transport {
 public:
  CrashingTransport(std::shared_ptr<transport::LoopbackFabric> fabric, int rank, int limit)
      : fabric_(fabric), inner_(fabric, rank), limit_(limit), counters_(static_cast<size_t>(fabric->size())) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* name() const override { return "crashing loopback"; }
  // Posts to `peer` fail as UCX's do when no endpoint can be made to a
  // rank on another host that is gone, while peer_status() knows nothing.
  void unreachable(int peer) { unreachable_.push_back(peer); }
  Status post_send(int peer, uint64_t tag, const void* buf, size_t bytes, transport::Completion* done) override {
    if (std::count(unreachable_.begin(), unreachable_.end(), peer)) {
      return RemoteError("cannot connect to rank " + std::to_string(peer) + ": Destination is unreachable");
    }
    if (limit_ >= 0 && sends_++ >= limit_) {
      crashed_ = true;
      fabric_->fail_rank(inner_.rank());
      return InternalError("crashed");
    }
    return inner_.post_send(peer, tag, buf, bytes, done);
  }
  Status post_recv(int peer, uint64_t tag, void* buf, size_t bytes, transport::Completion* done) override {
    return inner_.post_recv(peer, tag, buf, bytes, done);
  }
  void wait_for_events(int timeout_ms) override { inner_.wait_for_events(timeout_ms); }
  Status register_memory(void*, size_t) override { return Status::Ok(); }
  void deregister_memory(void*) override {}
  Status make_sibling(int, int, std::unique_ptr<Transport>*) const override { return InvalidUsage("no"); }
  const std::vector<uint8_t>& local_address() const override { return inner_.local_address(); }
  Status connect(std::vector<std::vector<uint8_t>>, const std::vector<int>&) override { return Status::Ok(); }
  Status peer_status(int peer) const override { return inner_.peer_status(peer); }
  void check_peers_now() override { inner_.check_peers_now(); }
  bool crashed() const { return crashed_; }

 protected:
  void cancel_posted(transport::Completion* pending) override { inner_.cancel(pending); }
  bool progress_posted() override { return inner_.progress(); }
  std::string describe_posted_error(const transport::Completion& c) const override { return inner_.describe_error(c); }
  const Counters& counters(int peer) const override { return counters_[static_cast<size_t>(peer)]; }

 private:
  std::shared_ptr<transport::LoopbackFabric> fabric_;
  transport::LoopbackTransport inner_;
  int limit_;
  std::vector<int> unreachable_;
  int sends_ = 0;
  bool crashed_ = false;
  std::vector<Counters> counters_;
};

struct Outcome {
  Status status;
  std::vector<int> decided;
  std::vector<int> timed_out;
  bool crashed = false;
};

// Runs the agreement on every rank not in `dead` (failed before it starts):
// rank r knows initially the dead ranks in known[r]; it crashes at its
// limits[r]-th send (-1: never).
std::vector<Outcome> agree(int n, const std::set<int>& dead, const std::vector<std::set<int>>& known,
                           const std::vector<int>& limits, std::chrono::milliseconds silence = 5000ms) {
  auto fabric = std::make_shared<transport::LoopbackFabric>(n);
  for (int r : dead) fabric->fail_rank(r);
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  std::vector<std::unique_ptr<CrashingTransport>> transports;
  for (int r = 0; r < n; ++r) transports.push_back(std::make_unique<CrashingTransport>(fabric, r, limits[static_cast<size_t>(r)]));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (dead.count(r)) continue;
    threads.emplace_back([&, r] {
      std::vector<bool> failed(static_cast<size_t>(n), false);
      for (int d : known[static_cast<size_t>(r)]) failed[static_cast<size_t>(d)] = true;
      CrashingTransport* t = transports[static_cast<size_t>(r)].get();
      coll::Agreement agreement(t, 3, failed, silence);
      Outcome& o = outcomes[static_cast<size_t>(r)];
      o.status = exec::drive(agreement, "agreement", exec::Clock::now() + 3 * silence, nullptr, t);
      o.crashed = t->crashed();
      if (o.status.ok()) o.decided = agreement.decided();
      o.timed_out = agreement.timed_out();
    });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

std::string text(const std::vector<int>& ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "}";
}

TEST(Agreement, NoFailureDecidesNobodyInOneRound) {
  for (int n = 1; n <= 9; ++n) {
    const auto outcomes = agree(n, {}, std::vector<std::set<int>>(static_cast<size_t>(n)), std::vector<int>(static_cast<size_t>(n), -1));
    for (const Outcome& o : outcomes) {
      ASSERT_TRUE(o.status.ok()) << o.status.message();
      EXPECT_TRUE(o.decided.empty()) << text(o.decided);
    }
  }
}

TEST(Agreement, SurvivorsThatKnowDifferentDeathsAgreeOnAllOfThem) {
  // Rank 0 knows rank 2 is dead, rank 3 knows rank 5; the others learn
  // both from them, or from the transport.
  const int n = 7;
  std::vector<std::set<int>> known(n);
  known[0] = {2};
  known[3] = {5};
  const auto outcomes = agree(n, {2, 5}, known, std::vector<int>(n, -1));
  for (int r : {0, 1, 3, 4, 6}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    ASSERT_TRUE(o.status.ok()) << "rank " << r << ": " << o.status.message();
    EXPECT_EQ(o.decided, (std::vector<int>{2, 5})) << "rank " << r;
  }
}

TEST(Agreement, RandomDeathsBeforeAndDuringItAllSurvivorsDecideTheSameSet) {
  std::mt19937 random(20261207);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 2 + static_cast<int>(random() % 8);
    std::set<int> dead;
    std::vector<int> limits(static_cast<size_t>(n), -1);
    for (int r = 0; r < n; ++r) {
      const unsigned dice = random() % 10;
      if (dice < 2) {
        dead.insert(r);
      } else if (dice < 4) {
        limits[static_cast<size_t>(r)] = static_cast<int>(random() % static_cast<unsigned>(3 * n));
      }
    }
    if (static_cast<int>(dead.size()) == n) dead.erase(dead.begin());
    std::vector<std::set<int>> known(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      for (int d : dead) {
        if (random() % 2) known[static_cast<size_t>(r)].insert(d);
      }
    }
    const auto outcomes = agree(n, dead, known, limits);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + std::to_string(n) + " ranks, dead " +
                 text(std::vector<int>(dead.begin(), dead.end())));
    std::set<int> crashed;
    for (int r = 0; r < n; ++r) {
      if (outcomes[static_cast<size_t>(r)].crashed) crashed.insert(r);
    }
    const std::vector<int>* first = nullptr;
    for (int r = 0; r < n; ++r) {
      const Outcome& o = outcomes[static_cast<size_t>(r)];
      if (dead.count(r) || crashed.count(r)) continue;
      ASSERT_TRUE(o.status.ok()) << "rank " << r << ": " << o.status.message();
      if (!first) first = &o.decided;
      EXPECT_EQ(o.decided, *first) << "rank " << r << " decided " << text(o.decided) << ", another " << text(*first);
      for (int d : dead) EXPECT_TRUE(std::count(o.decided.begin(), o.decided.end(), d)) << "rank " << r << " left out " << d;
      for (int d : o.decided) {
        EXPECT_TRUE(dead.count(d) || crashed.count(d)) << "rank " << r << " counts the survivor " << d << " as failed";
      }
      EXPECT_TRUE(o.timed_out.empty()) << "rank " << r << " timed out " << text(o.timed_out);
    }
  }
}

TEST(Agreement, ARankThatCannotBeReachedIsCountedAtOnce) {
  // Rank 2 is gone on another host: no endpoint can be made to it, and the
  // transport has no other word of it (it never connected). The others
  // count it at their first send, not after the silence limit.
  const int n = 4;
  auto fabric = std::make_shared<transport::LoopbackFabric>(n);
  std::vector<std::unique_ptr<CrashingTransport>> transports;
  for (int r = 0; r < n; ++r) {
    transports.push_back(std::make_unique<CrashingTransport>(fabric, r, -1));
    transports.back()->unreachable(2);
  }
  std::vector<Outcome> outcomes(n);
  std::vector<std::thread> threads;
  for (int r : {0, 1, 3}) {
    threads.emplace_back([&, r] {
      coll::Agreement agreement(transports[static_cast<size_t>(r)].get(), 0, std::vector<bool>(n, false), 20000ms);
      Outcome& o = outcomes[static_cast<size_t>(r)];
      o.status = exec::drive(agreement, "agreement", exec::Clock::now() + 20000ms, nullptr,
                             transports[static_cast<size_t>(r)].get());
      o.decided = agreement.decided();
      o.timed_out = agreement.timed_out();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r : {0, 1, 3}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    ASSERT_TRUE(o.status.ok()) << "rank " << r << ": " << o.status.message();
    EXPECT_EQ(o.decided, std::vector<int>{2}) << "rank " << r;
    EXPECT_TRUE(o.timed_out.empty()) << "rank " << r;
  }
}

TEST(Agreement, ARankSilentForTheLimitIsCountedAsFailedAndNamed) {
  // Rank 2 is alive (not failed) but never takes part. The others start
  // together (each one's silence limit runs from its own start: a thread
  // that started a limit later would itself count as silent), and the
  // limit is a second, far beyond a thread's start on a loaded machine.
  const int n = 4;
  auto fabric = std::make_shared<transport::LoopbackFabric>(n);
  std::vector<std::unique_ptr<transport::LoopbackTransport>> transports;
  for (int r = 0; r < n; ++r) transports.push_back(std::make_unique<transport::LoopbackTransport>(fabric, r));
  std::vector<Outcome> outcomes(n);
  std::vector<std::thread> threads;
  std::atomic<int> started{0};
  const auto t0 = exec::Clock::now();
  for (int r : {0, 1, 3}) {
    threads.emplace_back([&, r] {
      started.fetch_add(1);
      while (started.load() < 3) std::this_thread::yield();
      coll::Agreement agreement(transports[static_cast<size_t>(r)].get(), 0, std::vector<bool>(n, false), 1000ms);
      Outcome& o = outcomes[static_cast<size_t>(r)];
      o.status = exec::drive(agreement, "agreement", exec::Clock::now() + 3000ms, nullptr, transports[static_cast<size_t>(r)].get());
      o.decided = agreement.decided();
      o.timed_out = agreement.timed_out();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GE(exec::Clock::now() - t0, 1000ms);
  for (int r : {0, 1, 3}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    ASSERT_TRUE(o.status.ok()) << "rank " << r << ": " << o.status.message();
    EXPECT_EQ(o.decided, std::vector<int>{2}) << "rank " << r;
    EXPECT_EQ(o.timed_out, std::vector<int>{2}) << "rank " << r;
  }
}

TEST(Agreement, AMessageOfAnotherSizeIsRefusedNamingTheSender) {
  // Rank 1 sends round 0 as a communicator of 9 ranks would.
  auto fabric = std::make_shared<transport::LoopbackFabric>(2);
  transport::LoopbackTransport zero(fabric, 0), one(fabric, 1);
  std::vector<uint8_t> wrong(12, 0);
  transport::Completion sent;
  ASSERT_TRUE(one.post_send(0, exec::agreement_tag(0, 0), wrong.data(), wrong.size(), &sent).ok());
  coll::Agreement agreement(&zero, 0, std::vector<bool>(2, false), 1000ms);
  const Status s = exec::drive(agreement, "agreement", exec::Clock::now() + 2000ms, nullptr, &zero);
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_NE(s.message().find("rank 1 sent 12 bytes in round 0"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace rr
