#pragma once
// What the algorithm tests share (algorithms_test.cpp, one_shot_test.cpp):
// N ranks as threads of the loopback transport, each running an algorithm
// through exec::drive; random inputs and the double-precision reference;
// the cases (dtype x op) and counts (none, one, counts that do not divide,
// pieces smaller than the buffer); an allreduce checked on 1 to 9 ranks.

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

#include "exec/algorithm.hpp"
#include "exec/call.hpp"
#include "memory/staging_pool.hpp"
#include "transport/loopback/loopback.hpp"

namespace rr::algorithm_ranks {

using Clock = std::chrono::steady_clock;

// The pool rounds a slot up to a page: pieces of 1016 floats (recursive
// doubling: after the 32-byte header) or 1024 (halving-doubling).
inline constexpr size_t kSlotBytes = 512;
inline constexpr size_t kSlots = 8;

struct Rank {
  std::unique_ptr<transport::LoopbackTransport> transport;
  memory::StagingPool pool;
};

// Runs `make(r, transport, pool)`'s algorithm on every rank, each on a thread
// of its own, with `prepare(r, algorithm)` before it; the ranks' results.
template <typename Alg>
std::vector<Status> run_ranks(int n, const std::function<std::unique_ptr<Alg>(int, transport::Transport*,
                                                                             memory::StagingPool*)>& make,
                              const std::function<void(int, Alg&)>& prepare) {
  auto fabric = std::make_shared<transport::LoopbackFabric>(n);
  std::vector<Rank> ranks(static_cast<size_t>(n));
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    Rank& rank = ranks[static_cast<size_t>(r)];
    rank.transport = std::make_unique<transport::LoopbackTransport>(fabric, r);
    EXPECT_TRUE(rank.pool.reserve(kSlotBytes, kSlots).ok());
  }
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Rank& rank = ranks[static_cast<size_t>(r)];
      std::unique_ptr<Alg> algorithm = make(r, rank.transport.get(), &rank.pool);
      prepare(r, *algorithm);
      results[static_cast<size_t>(r)] =
          exec::drive(*algorithm, "test call", Clock::now() + std::chrono::seconds(20), nullptr, rank.transport.get());
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

inline exec::Call call_of(exec::Collective collective, const void* send, void* recv, size_t count, rrDataType_t dtype,
                   rrRedOp_t op, int root = -1) {
  exec::Call call;
  call.collective = collective;
  call.sequence = 11;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = dtype;
  call.op = op;
  call.root = root;
  return call;
}

// Rank r's input: random values, small integers for int32 (exact sums).
inline std::vector<double> input(int r, size_t count, rrDataType_t dtype) {
  std::mt19937 gen(static_cast<unsigned>(1000 + r * 7919 + count));
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  std::uniform_int_distribution<int> small(-50, 50);
  std::vector<double> v(count);
  for (double& x : v) x = dtype == rrInt32 ? small(gen) : real(gen);
  return v;
}

inline double combine(double a, double b, rrRedOp_t op) {
  switch (op) {
    case rrMax:
      return std::max(a, b);
    case rrMin:
      return std::min(a, b);
    default:
      return a + b;  // sum, avg (divided at the end)
  }
}

// Element k of every rank's values reduced by `op`, in double.
inline double reduced(const std::vector<std::vector<double>>& values, size_t k, rrRedOp_t op) {
  double want = values[0][k];
  for (size_t r = 1; r < values.size(); ++r) want = combine(want, values[r][k], op);
  return op == rrAvg ? want / static_cast<double>(values.size()) : want;
}

// Buffers of float32 or int32 as the engine sees them, with the values in double.
struct Buffer {
  Buffer(rrDataType_t dtype, const std::vector<double>& values) : dtype(dtype), f(values.size()), i(values.size()) {
    for (size_t k = 0; k < values.size(); ++k) {
      f[k] = static_cast<float>(values[k]);
      i[k] = static_cast<int32_t>(values[k]);
    }
  }
  void* data() { return dtype == rrInt32 ? static_cast<void*>(i.data()) : static_cast<void*>(f.data()); }
  double at(size_t k) const { return dtype == rrInt32 ? i[k] : f[k]; }
  rrDataType_t dtype;
  std::vector<float> f;
  std::vector<int32_t> i;
};

// Every rank's random input (input()), as values and as the engine's
// buffers, and a zeroed output each.
struct Inputs {
  Inputs(int n, size_t count, rrDataType_t dtype) {
    for (int r = 0; r < n; ++r) {
      values.push_back(input(r, count, dtype));
      in.emplace_back(dtype, values.back());
      out.emplace_back(dtype, std::vector<double>(count, 0.0));
    }
  }
  std::vector<std::vector<double>> values;
  std::vector<Buffer> in, out;
};

struct Case {
  rrDataType_t dtype;
  rrRedOp_t op;
};
inline const Case kCases[] = {{rrFloat32, rrSum}, {rrFloat32, rrMax}, {rrFloat32, rrAvg}, {rrInt32, rrSum}, {rrInt32, rrMin}};
inline const size_t kCounts[] = {0, 1, 7, 1016, 1017, 3000, 4099};

inline std::string where(int n, size_t count, const Case& c, bool in_place) {
  return std::to_string(n) + " ranks, count " + std::to_string(count) + ", dtype " + std::to_string(c.dtype) +
         ", op " + std::to_string(c.op) + (in_place ? ", in place" : ", out of place");
}

// An allreduce on 1-9 ranks by `Alg` (prepared by `prepare(alg, call)`),
// every case and count, against the double reference; `setup(n)`, if any,
// before each run on n ranks.
template <typename Alg>
void check_allreduce(const std::function<std::unique_ptr<Alg>(int, int, transport::Transport*, memory::StagingPool*)>& make,
                     const std::function<void(Alg&, const exec::Call&)>& prepare,
                     const std::function<void(int)>& setup = nullptr) {
  for (int n = 1; n <= 9; ++n) {
    for (const Case& c : kCases) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          if (setup) setup(n);
          Inputs data(n, count, c.dtype);
          std::vector<std::vector<double>>& values = data.values;
          std::vector<Buffer>& in = data.in;
          std::vector<Buffer>& out = data.out;
          const std::vector<Status> results = run_ranks<Alg>(
              n, [&](int r, transport::Transport* t, memory::StagingPool* p) { return make(r, n, t, p); },
              [&](int r, Alg& alg) {
                Buffer& o = in_place ? in[static_cast<size_t>(r)] : out[static_cast<size_t>(r)];
                prepare(alg, call_of(exec::Collective::kAllReduce, in[static_cast<size_t>(r)].data(), o.data(),
                                     count, c.dtype, c.op));
              });
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(results[static_cast<size_t>(r)].ok())
                << where(n, count, c, in_place) << ": " << results[static_cast<size_t>(r)].message();
          }
          for (size_t k = 0; k < count; ++k) {
            const double want = reduced(values, k, c.op);
            for (int r = 0; r < n; ++r) {
              const Buffer& o = in_place ? in[static_cast<size_t>(r)] : out[static_cast<size_t>(r)];
              ASSERT_NEAR(o.at(k), want, 1e-4 * (1.0 + std::fabs(want)))
                  << where(n, count, c, in_place) << ", rank " << r << ", element " << k;
            }
          }
        }
      }
    }
  }
}

}  // namespace rr::algorithm_ranks
