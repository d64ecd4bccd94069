// The transport (lib/transport/transport.hpp) between two ranks: ping-pong
// latency and streaming bandwidth, over the in-process loopback transport and
// over UCX between two UcxTransport instances of this process (two workers,
// so UCX takes the path it takes between two processes on this host: shared
// memory by default; run with UCX_TLS=tcp to measure its TCP transport).
//
// One thread drives both ranks in turn (post, then progress both until the
// operations complete), so the figures are the transport's own cost with no
// thread hand-off or wake-up in them.
//   PingPong  rank 0 sends, rank 1 receives and sends the same bytes back:
//             time per iteration = one round trip (one-way latency = half)
//   Stream    a window of 16 messages from rank 0 to rank 1 in flight at
//             once, repeated: bytes/s = what one direction carries

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/loopback/loopback.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace {

using rr::transport::Completion;
using rr::transport::Transport;

constexpr int kWindow = 16;

// Two connected ranks of one kind of transport.
struct Pair {
  std::unique_ptr<Transport> a;  // rank 0
  std::unique_ptr<Transport> b;  // rank 1
  std::string error;
};

Pair make_loopback() {
  auto fabric = std::make_shared<rr::transport::LoopbackFabric>(2);
  Pair pair;
  pair.a = std::make_unique<rr::transport::LoopbackTransport>(fabric, 0);
  pair.b = std::make_unique<rr::transport::LoopbackTransport>(fabric, 1);
  return pair;
}

Pair make_ucx() {
  Pair pair;
  std::unique_ptr<rr::transport::UcxTransport> a;
  std::unique_ptr<rr::transport::UcxTransport> b;
  rr::Status s = rr::transport::UcxTransport::Create(0, 2, &a);
  if (s.ok()) s = rr::transport::UcxTransport::Create(1, 2, &b);
  if (s.ok()) {
    const std::vector<std::vector<uint8_t>> addresses = {a->local_address(), b->local_address()};
    s = a->connect(addresses, {1});
    if (s.ok()) s = b->connect(addresses, {0});
  }
  if (!s.ok()) {
    pair.error = "ucx: " + s.message();
    return pair;
  }
  pair.a = std::move(a);
  pair.b = std::move(b);
  return pair;
}

// Progresses both ranks until every completion in `ops` is done; false if one failed.
bool drive(Pair& pair, Completion* ops, int n) {
  for (;;) {
    pair.a->progress();
    pair.b->progress();
    bool all = true;
    for (int i = 0; i < n; ++i) {
      if (ops[i].done && ops[i].failed) return false;
      all = all && ops[i].done;
    }
    if (all) return true;
  }
}

void ping_pong(benchmark::State& state, Pair pair) {
  if (!pair.error.empty()) {
    state.SkipWithError(pair.error.c_str());
    return;
  }
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf_a(bytes, 1);
  std::vector<uint8_t> buf_b(bytes, 2);
  Completion ops[2];
  uint64_t tag = 0;
  for (auto _ : state) {
    // ping: rank 0 -> rank 1
    tag = (tag + 1) & rr::transport::kTagMask;
    if (!pair.b->post_recv(0, tag, buf_b.data(), bytes, &ops[0]).ok() ||
        !pair.a->post_send(1, tag, buf_a.data(), bytes, &ops[1]).ok() || !drive(pair, ops, 2)) {
      state.SkipWithError("ping failed");
      break;
    }
    // pong: rank 1 -> rank 0, the same bytes back
    if (!pair.a->post_recv(1, tag, buf_a.data(), bytes, &ops[0]).ok() ||
        !pair.b->post_send(0, tag, buf_b.data(), bytes, &ops[1]).ok() || !drive(pair, ops, 2)) {
      state.SkipWithError("pong failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

void stream(benchmark::State& state, Pair pair) {
  if (!pair.error.empty()) {
    state.SkipWithError(pair.error.c_str());
    return;
  }
  const auto bytes = static_cast<size_t>(state.range(0));
  // [message] source and destination buffers, distinct so no two in flight share memory.
  std::vector<std::vector<uint8_t>> src(kWindow, std::vector<uint8_t>(bytes, 1));
  std::vector<std::vector<uint8_t>> dst(kWindow, std::vector<uint8_t>(bytes, 0));
  Completion ops[2 * kWindow];
  uint64_t tag = 0;
  for (auto _ : state) {
    bool ok = true;
    for (int i = 0; i < kWindow && ok; ++i) {
      ok = pair.b->post_recv(0, tag + i, dst[i].data(), bytes, &ops[i]).ok();
    }
    for (int i = 0; i < kWindow && ok; ++i) {
      ok = pair.a->post_send(1, tag + i, src[i].data(), bytes, &ops[kWindow + i]).ok();
    }
    if (!ok || !drive(pair, ops, 2 * kWindow)) {
      state.SkipWithError("stream failed");
      break;
    }
    tag = (tag + kWindow) & rr::transport::kTagMask;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kWindow * bytes));
}

void BM_LoopbackPingPong(benchmark::State& state) { ping_pong(state, make_loopback()); }
void BM_LoopbackStream(benchmark::State& state) { stream(state, make_loopback()); }
void BM_UcxPingPong(benchmark::State& state) { ping_pong(state, make_ucx()); }
void BM_UcxStream(benchmark::State& state) { stream(state, make_ucx()); }

// 8 B (latency), 4 KiB, 64 KiB, then 512 KiB (the default chunk) and 4 MiB.
BENCHMARK(BM_LoopbackPingPong)->Arg(8)->Arg(4 << 10)->Arg(64 << 10)->Arg(512 << 10);
BENCHMARK(BM_LoopbackStream)->Arg(4 << 10)->Arg(64 << 10)->Arg(512 << 10)->Arg(4 << 20);
BENCHMARK(BM_UcxPingPong)->Arg(8)->Arg(4 << 10)->Arg(64 << 10)->Arg(512 << 10);
BENCHMARK(BM_UcxStream)->Arg(4 << 10)->Arg(64 << 10)->Arg(512 << 10)->Arg(4 << 20);

}  // namespace
