// Every element a call produced, against the reference made here: the
// output, the input buffers the call must have left alone, and the parts of
// an output it must not have written (alltoallv's gaps).

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "../common/integer_fold.hpp"
#include "issued.hpp"
#include "values.hpp"

namespace soak {

namespace {

constexpr size_t kReportedElements = 5;

template <size_t Bytes>
using Bits = std::conditional_t<Bytes == 1, uint8_t,
                                std::conditional_t<Bytes == 2, uint16_t, std::conditional_t<Bytes == 4, uint32_t, uint64_t>>>;

template <typename T>
std::string show(T v) {
  char text[96];
  Bits<sizeof(T)> bits;
  std::memcpy(&bits, &v, sizeof(bits));
  if constexpr (kIsFloat<T>) {
    std::snprintf(text, sizeof(text), "%.9g (0x%0*" PRIx64 ")", to_double(v), static_cast<int>(2 * sizeof(T)),
                  static_cast<uint64_t>(bits));
  } else if constexpr (std::is_signed_v<T>) {
    std::snprintf(text, sizeof(text), "%" PRId64 " (0x%0*" PRIx64 ")", static_cast<int64_t>(v),
                  static_cast<int>(2 * sizeof(T)), static_cast<uint64_t>(bits));
  } else {
    std::snprintf(text, sizeof(text), "%" PRIu64, static_cast<uint64_t>(v));
  }
  return text;
}

template <typename T>
T load(const uint8_t* base, size_t i) {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

// Element i of the input with this key, as the call's data: typed values for
// reductions, random bits for data movement.
template <typename T>
T input(bool reduction, uint64_t key, size_t i, rrRedOp_t op) {
  if (reduction) return reduction_input<T>(key, i, op);
  const auto bits = static_cast<Bits<sizeof(T)>>(raw(key, i));
  T v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// The reduction over the communicator's ranks of input element i: floats in
// double, with how far a correct result may be from it (each of the ring's
// n - 1 additions rounds to T, and may round a partial sum of up to the sum
// of magnitudes; avg adds one division); integers exactly, with the type's
// wrap-around.
template <typename T>
T reduce_reference(const std::vector<uint64_t>& keys, size_t i, rrRedOp_t op, double* expect, double* tolerance) {
  const int n = static_cast<int>(keys.size());
  *tolerance = 0;
  if constexpr (kIsFloat<T>) {
    double acc = to_double(reduction_input<T>(keys[0], i, op));
    double sum_abs = std::fabs(acc);
    for (int r = 1; r < n; ++r) {
      const double x = to_double(reduction_input<T>(keys[static_cast<size_t>(r)], i, op));
      sum_abs += std::fabs(x);
      if (op == rrSum || op == rrAvg) acc += x;
      if (op == rrProd) acc *= x;
      if (op == rrMax) acc = std::max(acc, x);
      if (op == rrMin) acc = std::min(acc, x);
    }
    const double eps = kEpsilon<T>;
    if (op == rrSum) *tolerance = (n + 1) * eps * sum_abs;
    if (op == rrAvg) acc /= n, *tolerance = (n + 2) * eps * sum_abs / n;
    if (op == rrProd) *tolerance = (n + 1) * eps * std::fabs(acc) * 1.01;
    *expect = acc;
    return from_double<T>(acc);
  } else {
    const T result = rr::test::fold_integers<T>(op, n, [&](int r) {
      return reduction_input<T>(keys[static_cast<size_t>(r)], i, op);
    });
    *expect = static_cast<double>(result);
    return result;
  }
}

}  // namespace

class Checker {
 public:
  Checker(Runner::Issued& c, bool* corrupt_pending) : c_(c), corrupt_pending_(corrupt_pending) {}

  // buffer[out_first + j] == input element source_first + j of comm rank `source`.
  void input_of(const char* buffer, const uint8_t* base, size_t out_first, size_t count, int source,
                size_t source_first) {
    if (count == 0) return;
    const bool reduction = c_.reduction();
    const rrRedOp_t op = c_.call->op;
    const uint64_t key = c_.keys[static_cast<size_t>(source)];
    with_dtype(c_.call->dtype, [&](auto tag) {
      using T = decltype(tag);
      for (size_t j = 0; j < count; ++j) {
        T want = input<T>(reduction, key, source_first + j, op);
        if (corrupt()) want = flip(want);
        const T got = load<T>(base, out_first + j);
        if (!same_bits(got, want)) {
          wrong(buffer, out_first + j, show(want) + " (input element " + std::to_string(source_first + j) +
                                           " of comm rank " + std::to_string(source) + ")", show(got));
        }
      }
    });
  }

  // buffer[out_first + j] == the reduction over all ranks of input element in_first + j.
  void reduction_of(const char* buffer, const uint8_t* base, size_t out_first, size_t count, size_t in_first) {
    const rrRedOp_t op = c_.call->op;
    with_dtype(c_.call->dtype, [&](auto tag) {
      using T = decltype(tag);
      for (size_t j = 0; j < count; ++j) {
        double expect = 0, tolerance = 0;
        T want = reduce_reference<T>(c_.keys, in_first + j, op, &expect, &tolerance);
        if (corrupt()) want = flip(want), expect = 2 * expect + 1;
        const T got = load<T>(base, out_first + j);
        bool ok;
        if constexpr (kIsFloat<T>) {
          ok = std::fabs(to_double(got) - expect) <= tolerance;
        } else {
          ok = same_bits(got, want);
        }
        if (!ok) {
          char text[96];
          std::snprintf(text, sizeof(text), "%.9g +- %.3g", expect, tolerance);
          wrong(buffer, out_first + j, kIsFloat<T> ? std::string(text) : show(want), show(got));
        }
      }
    });
  }

  // buffer[first + j] still holds the poison: nothing was written there.
  void untouched(const char* buffer, const uint8_t* base, size_t first, size_t count) {
    const size_t elem = c_.elem;
    for (size_t j = 0; j < count; ++j) {
      const uint8_t* p = base + (first + j) * elem;
      bool poisoned = !corrupt();
      for (size_t b = 0; b < elem; ++b) poisoned = poisoned && p[b] == kPoison;
      if (!poisoned) wrong(buffer, first + j, "not written (a gap between blocks)", "overwritten");
    }
  }

 private:
  bool corrupt() {
    if (!*corrupt_pending_) return false;
    *corrupt_pending_ = false;
    return true;
  }
  template <typename T>
  static T flip(T v) {
    Bits<sizeof(T)> bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bits = static_cast<Bits<sizeof(T)>>(bits ^ 0x41);
    std::memcpy(&v, &bits, sizeof(bits));
    return v;
  }
  void wrong(const char* buffer, size_t element, const std::string& expected, const std::string& got) {
    if (c_.wrong++ < kReportedElements) {
      c_.report += std::string("\n  ") + buffer + "[" + std::to_string(element) + "]: expected " + expected +
                   ", got " + got;
    }
  }

  Runner::Issued& c_;
  bool* corrupt_pending_;
};

void Runner::check(Issued& c) {
  const Call& k = *c.call;
  bool corrupt_pending = k.index >= corrupt_call_ && !corrupted_;
  Checker check(c, &corrupt_pending);
  const size_t n = static_cast<size_t>(c.n);
  const size_t me = static_cast<size_t>(c.me);
  const size_t count = c.count;
  const bool is_root = c.me == c.root;
  const uint8_t* send = c.send;
  const uint8_t* recv = c.recv;
  switch (k.kind) {
    case Kind::kAllReduce:
      check.reduction_of("recvbuff", recv, 0, count, 0);
      if (!k.in_place) check.input_of("sendbuff", send, 0, count, c.me, 0);
      break;
    case Kind::kReduce:
      if (is_root) check.reduction_of("recvbuff", recv, 0, count, 0);
      if (!k.in_place) check.input_of("sendbuff", send, 0, count, c.me, 0);
      if (k.in_place && !is_root) check.input_of("sendbuff (in place, not the root)", recv, 0, count, c.me, 0);
      break;
    case Kind::kBroadcast:
      check.input_of("recvbuff", recv, 0, count, c.root, 0);
      if (!k.in_place && is_root) check.input_of("sendbuff", send, 0, count, c.root, 0);
      break;
    case Kind::kAllGather:
      for (size_t p = 0; p < n; ++p) check.input_of("recvbuff", recv, p * count, count, static_cast<int>(p), 0);
      if (!k.in_place) check.input_of("sendbuff", send, 0, count, c.me, 0);
      break;
    case Kind::kReduceScatter:
      if (k.in_place) {
        check.reduction_of("recvbuff (in place)", recv, me * count, count, me * count);
      } else {
        check.reduction_of("recvbuff", recv, 0, count, me * count);
        check.input_of("sendbuff", send, 0, n * count, c.me, 0);
      }
      break;
    case Kind::kGather:
      if (is_root) {
        for (size_t p = 0; p < n; ++p) check.input_of("recvbuff", recv, p * count, count, static_cast<int>(p), 0);
      }
      if (!k.in_place || !is_root) check.input_of("sendbuff", send, 0, count, c.me, 0);
      break;
    case Kind::kScatter:
      if (k.in_place && is_root) {
        check.input_of("sendbuff (in place)", recv, 0, n * count, c.root, 0);
      } else {
        check.input_of("recvbuff", recv, 0, count, c.root, me * count);
        if (is_root) check.input_of("sendbuff", send, 0, n * count, c.root, 0);
      }
      break;
    case Kind::kAllToAll:
      for (size_t p = 0; p < n; ++p) {
        check.input_of("recvbuff", recv, p * count, count, static_cast<int>(p), me * count);
      }
      check.input_of("sendbuff", send, 0, n * count, c.me, 0);
      break;
    case Kind::kAllToAllv: {
      std::vector<std::pair<size_t, size_t>> blocks;  // [displ, count) received, to find the gaps
      for (size_t p = 0; p < n; ++p) {
        check.input_of("recvbuff", recv, c.rdispls[p], c.rcounts[p], static_cast<int>(p), c.source_displs[p]);
        blocks.emplace_back(c.rdispls[p], c.rcounts[p]);
      }
      std::sort(blocks.begin(), blocks.end());
      size_t at = 0;
      for (const auto& [displ, length] : blocks) {
        if (displ > at) check.untouched("recvbuff", recv, at, displ - at);
        at = std::max(at, displ + length);
      }
      if (n * count > at) check.untouched("recvbuff", recv, at, n * count - at);
      check.input_of("sendbuff", send, 0, n * count, c.me, 0);
      break;
    }
    case Kind::kSendRecv:
    case Kind::kIsendIrecv:
    case Kind::kTagged: {
      size_t total_sent = 0;
      for (const Message& m : c.recvs) check.input_of("recvbuff", recv, m.offset, m.count, m.peer, m.source_offset);
      for (const Message& m : c.sends) total_sent += m.count;
      check.input_of("sendbuff", send, 0, total_sent, c.me, 0);
      break;
    }
    case Kind::kBarrier:
    case Kind::kSplit: break;
  }
  if (k.index >= corrupt_call_ && !corrupt_pending) corrupted_ = true;
  if (c.wrong > 0) {
    die("rank " + std::to_string(world_rank_) + ": WRONG RESULT in " + c.describe() + ": " + std::to_string(c.wrong) +
        " wrong element(s); the first:" + c.report);
  }
}

}  // namespace soak
