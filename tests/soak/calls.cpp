#include "calls.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "issued.hpp"
#include "shapes.hpp"
#include "values.hpp"

namespace soak {

namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

const char* dtype_name(rrDataType_t dtype) {
  static const char* const names[] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                      "uint64",  "float16", "float32", "float64", "bfloat16"};
  const int i = static_cast<int>(dtype);
  return i >= 0 && i < rrNumTypes ? names[i] : "?";
}

const char* op_name(rrRedOp_t op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < rrNumOps ? names[i] : "?";
}

uint64_t Stats::calls() const {
  uint64_t total = 0;
  for (const KindCount& k : kinds) total += k.blocking + k.async;
  return total;
}

namespace {

FailureHook failure_hook = nullptr;
thread_local const Call* current_call = nullptr;

}  // namespace

void set_failure_hook(FailureHook hook) { failure_hook = hook; }

void set_current_call(const Call* call) { current_call = call; }

void die(const std::string& message) {
  // Locked for good: whoever comes second waits here until the first exits.
  static std::mutex first;
  first.lock();
  std::fprintf(stderr, "soak: %s\n", message.c_str());
  std::fflush(stderr);
  if (failure_hook) failure_hook(message, current_call);
  std::fflush(stdout);
  std::fflush(stderr);
  // Not exit(): other threads may still be inside the engine (with
  // --threads, or the engine's own), and static destructors running under
  // them could turn a clean failure into a crash.
  std::_Exit(1);
}

void learn_members(Comm* comm, int world_rank) {
  if (rrCommUserRank(comm->handle, &comm->rank) != rrSuccess || rrCommCount(comm->handle, &comm->size) != rrSuccess) {
    die("rrCommUserRank/rrCommCount failed: " + std::string(rrGetLastError(comm->handle)));
  }
  std::vector<int32_t> members(static_cast<size_t>(comm->size));
  const int32_t mine = world_rank;
  const rrResult_t r = rrAllGather(&mine, members.data(), 1, rrInt32, comm->handle, nullptr);
  if (r != rrSuccess) die("rrAllGather of the members' world ranks failed: " + std::string(rrGetLastError(comm->handle)));
  comm->members.assign(members.begin(), members.end());
}

std::string Runner::Issued::describe() const {
  const Call& k = *call;
  std::string s = "call " + std::to_string(k.index) + " (" + kind_name(k.kind);
  if (!is_point_to_point(k.kind) && k.kind != Kind::kSplit) s += k.async ? " Async" : " blocking";
  if (k.in_place) s += ", in place";
  s += std::string(", ") + dtype_name(k.dtype);
  if (reduction()) s += std::string(" ") + op_name(k.op);
  s += ", count " + std::to_string(count);
  if (k.kind == Kind::kReduce || k.kind == Kind::kBroadcast || k.kind == Kind::kGather || k.kind == Kind::kScatter) {
    s += ", root " + std::to_string(root);
  }
  s += std::string(", on communicator '") + comm_name(k.comm) + "' (this rank " + std::to_string(me) + " of " +
       std::to_string(n) + "; world ranks " + join(comm->members) + "))";
  return s;
}

Block alltoallv_block(uint64_t detail, size_t count, int n, int from, int to) {
  const uint64_t h = mix(detail ^ mix(static_cast<uint64_t>(from) * 1000003u + static_cast<uint64_t>(to)));
  Block b;
  b.count = (h & 7) == 0 ? 0 : (h >> 8) % (count + 1);
  const size_t room = count - b.count + 1;
  const uint64_t regions = static_cast<uint64_t>(n);
  // Regions rotate by the sender (send side) and by the receiver (receive side).
  const size_t send_region = static_cast<size_t>((static_cast<uint64_t>(to) + mix(detail + static_cast<uint64_t>(from)) % regions) % regions);
  const size_t recv_region = static_cast<size_t>((static_cast<uint64_t>(from) + mix(detail * 3 + static_cast<uint64_t>(to)) % regions) % regions);
  b.send_displ = send_region * count + (h >> 40) % room;
  b.recv_displ = recv_region * count + mix(h) % room;
  return b;
}

Runner::Runner(uint64_t seed, int world_rank, int world_size, std::vector<Comm>* comms, std::vector<Slot>* slots)
    : seed_(seed), world_rank_(world_rank), world_size_(world_size), comms_(comms), slots_(slots) {}

void Runner::prepare(Issued& c) {
  const Call& k = *c.call;
  Comm& comm = *c.comm;
  const Slot& slot = (*slots_)[static_cast<size_t>(k.slot)];
  c.n = comm.size;
  c.me = comm.rank;
  c.root = static_cast<int>(k.root_draw % static_cast<uint64_t>(c.n));
  c.elem = dtype_size(k.dtype);
  c.send = slot.send;
  c.recv = slot.recv;
  c.keys.resize(static_cast<size_t>(c.n));
  for (int r = 0; r < c.n; ++r) c.keys[static_cast<size_t>(r)] = input_key(seed_, k.index, comm.members[static_cast<size_t>(r)]);
  const size_t per = std::min(k.bytes, slot.bytes) / c.elem;
  const size_t n = static_cast<size_t>(c.n);
  switch (k.kind) {
    case Kind::kAllReduce:
    case Kind::kReduce:
    case Kind::kBroadcast: c.count = per; break;
    case Kind::kBarrier:
    case Kind::kSplit: c.count = 0; break;
    case Kind::kSendRecv:
    case Kind::kIsendIrecv:
    case Kind::kTagged: c.count = per / kMaxMessages; break;
    default: c.count = per / n; break;
  }
  if (k.kind == Kind::kAllToAllv) {
    c.scounts.assign(n, 0), c.sdispls.assign(n, 0), c.rcounts.assign(n, 0), c.rdispls.assign(n, 0);
    c.source_displs.assign(n, 0);
    for (int p = 0; p < c.n; ++p) {
      const Block out = alltoallv_block(k.detail, c.count, c.n, c.me, p);
      const Block in = alltoallv_block(k.detail, c.count, c.n, p, c.me);
      c.scounts[static_cast<size_t>(p)] = out.count, c.sdispls[static_cast<size_t>(p)] = out.send_displ;
      c.rcounts[static_cast<size_t>(p)] = in.count, c.rdispls[static_cast<size_t>(p)] = in.recv_displ;
      c.source_displs[static_cast<size_t>(p)] = in.send_displ;
    }
  }
  if (is_point_to_point(k.kind)) {
    // The same message list on every rank: to the right, then to the left.
    Rng rng(k.detail);
    const size_t to_right = 1 + rng.below(3), to_left = rng.below(3);
    std::vector<size_t> counts(to_right + to_left);
    for (size_t& m : counts) m = rng.chance(0.1) ? 0 : rng.below(c.count + 1);
    const int base_tag = k.kind == Kind::kTagged ? 1 + static_cast<int>(k.index % (uint64_t{1} << 27)) * 8 : 0;
    c.sends.clear(), c.recvs.clear();
    size_t send_offset = 0, recv_offset = 0;
    std::vector<size_t> source_offsets;
    for (size_t m = 0; m < counts.size(); ++m) {
      const bool rightward = m < to_right;
      const int tag = k.kind == Kind::kTagged ? base_tag + static_cast<int>(rightward ? m : 4 + m - to_right) : 0;
      c.sends.push_back(Message{rightward ? c.right() : c.left(), false, tag, send_offset, counts[m], 0, 0});
      source_offsets.push_back(send_offset);
      send_offset += counts[m];
    }
    // My receives mirror my neighbours' sends: the left one's rightward messages, then the right one's leftward.
    for (size_t m = 0; m < counts.size(); ++m) {
      const bool from_left = m < to_right;
      Message in{from_left ? c.left() : c.right(), false, c.sends[m].tag, recv_offset, counts[m], source_offsets[m], 0};
      in.any_source = k.kind == Kind::kTagged && rng.chance(0.5);
      c.recvs.push_back(in);
      recv_offset += counts[m];
    }
    if (k.kind == Kind::kTagged) {
      // Distinct tags match independently: post them in any order.
      for (size_t i = c.sends.size(); i > 1; --i) std::swap(c.sends[i - 1], c.sends[rng.below(i)]);
      for (size_t i = c.recvs.size(); i > 1; --i) std::swap(c.recvs[i - 1], c.recvs[rng.below(i)]);
    }
  }
}

namespace {

// dst[j] = element first + j of the input with this key.
void fill_input(bool reduction, rrDataType_t dtype, rrRedOp_t op, uint64_t key, uint8_t* dst, size_t first,
                size_t count) {
  if (reduction) {
    with_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* out = reinterpret_cast<T*>(dst);
      for (size_t j = 0; j < count; ++j) out[j] = reduction_input<T>(key, first + j, op);
    });
  } else {
    with_width(dtype_size(dtype), [&](auto tag) {
      using U = decltype(tag);
      U* out = reinterpret_cast<U*>(dst);
      for (size_t j = 0; j < count; ++j) out[j] = static_cast<U>(raw(key, first + j));
    });
  }
}

}  // namespace

void Runner::issue(Issued& c) {
  const Call& k = *c.call;
  rrComm_t comm = c.comm->handle;
  const size_t e = c.elem;
  const size_t n = static_cast<size_t>(c.n);
  const size_t me = static_cast<size_t>(c.me);
  const bool is_root = c.me == c.root;
  const uint64_t my_key = c.keys[me];
  const bool red = c.reduction();
  auto fill = [&](uint8_t* dst, size_t first, size_t count) { fill_input(red, k.dtype, k.op, my_key, dst, first, count); };
  auto poison = [&](uint8_t* dst, size_t count) { std::memset(dst, kPoison, count * e); };
  rrRequest_t* request = nullptr;
  if (k.async) {
    c.requests.push_back(nullptr);
    request = &c.requests.back();
  }
  auto check = [&](const char* fn, rrResult_t r) {
    if (r == rrSuccess) return;
    die("rank " + std::to_string(world_rank_) + ": " + c.describe() + ": " + fn + " failed: " + rrGetErrorString(r) +
        ": " + rrGetLastError(comm));
  };
  uint8_t* const send = c.send;
  uint8_t* const recv = c.recv;
  const size_t count = c.count;
  switch (k.kind) {
    case Kind::kAllReduce: {
      uint8_t* in = k.in_place ? recv : send;
      fill(in, 0, count);
      if (!k.in_place) poison(recv, count);
      check("rrAllReduce", k.async ? rrAllReduceAsync(in, recv, count, k.dtype, k.op, comm, request)
                                   : rrAllReduce(in, recv, count, k.dtype, k.op, comm, nullptr));
      break;
    }
    case Kind::kReduce: {
      uint8_t* in = k.in_place ? recv : send;
      fill(in, 0, count);
      if (!k.in_place) poison(recv, count);
      check("rrReduce", k.async ? rrReduceAsync(in, recv, count, k.dtype, k.op, c.root, comm, request)
                                : rrReduce(in, recv, count, k.dtype, k.op, c.root, comm, nullptr));
      break;
    }
    case Kind::kBroadcast: {
      uint8_t* in = k.in_place ? recv : send;
      if (!k.in_place || !is_root) poison(recv, count);
      if (is_root) fill(in, 0, count);
      check("rrBroadcast", k.async ? rrBroadcastAsync(in, recv, count, k.dtype, c.root, comm, request)
                                   : rrBroadcast(in, recv, count, k.dtype, c.root, comm, nullptr));
      break;
    }
    case Kind::kAllGather: {
      poison(recv, n * count);
      uint8_t* in = k.in_place ? recv + me * count * e : send;
      fill(in, 0, count);
      check("rrAllGather", k.async ? rrAllGatherAsync(in, recv, count, k.dtype, comm, request)
                                   : rrAllGather(in, recv, count, k.dtype, comm, nullptr));
      break;
    }
    case Kind::kReduceScatter: {
      uint8_t* in = k.in_place ? recv : send;
      uint8_t* out = k.in_place ? recv + me * count * e : recv;
      fill(in, 0, n * count);
      if (!k.in_place) poison(recv, count);
      check("rrReduceScatter", k.async ? rrReduceScatterAsync(in, out, count, k.dtype, k.op, comm, request)
                                       : rrReduceScatter(in, out, count, k.dtype, k.op, comm, nullptr));
      break;
    }
    case Kind::kGather: {
      const bool in_place = k.in_place && is_root;
      if (is_root) poison(recv, n * count);
      uint8_t* in = in_place ? recv + me * count * e : send;
      fill(in, 0, count);
      check("rrGather", k.async ? rrGatherAsync(in, recv, count, k.dtype, c.root, comm, request)
                                : rrGather(in, recv, count, k.dtype, c.root, comm, nullptr));
      break;
    }
    case Kind::kScatter: {
      const bool in_place = k.in_place && is_root;
      uint8_t* in = in_place ? recv : send;
      uint8_t* out = in_place ? recv + me * count * e : recv;
      if (is_root) fill(in, 0, n * count);
      if (!in_place) poison(recv, count);
      check("rrScatter", k.async ? rrScatterAsync(in, out, count, k.dtype, c.root, comm, request)
                                 : rrScatter(in, out, count, k.dtype, c.root, comm, nullptr));
      break;
    }
    case Kind::kAllToAll: {
      fill(send, 0, n * count);
      poison(recv, n * count);
      check("rrAllToAll", k.async ? rrAllToAllAsync(send, recv, count, k.dtype, comm, request)
                                  : rrAllToAll(send, recv, count, k.dtype, comm, nullptr));
      break;
    }
    case Kind::kAllToAllv: {
      fill(send, 0, n * count);
      poison(recv, n * count);
      check("rrAllToAllv",
            k.async ? rrAllToAllvAsync(send, c.scounts.data(), c.sdispls.data(), recv, c.rcounts.data(),
                                       c.rdispls.data(), k.dtype, comm, request)
                    : rrAllToAllv(send, c.scounts.data(), c.sdispls.data(), recv, c.rcounts.data(), c.rdispls.data(),
                                  k.dtype, comm, nullptr));
      break;
    }
    case Kind::kBarrier:
      check("rrBarrier", k.async ? rrBarrierAsync(comm, request) : rrBarrier(comm, nullptr));
      break;
    case Kind::kSendRecv:
    case Kind::kIsendIrecv:
    case Kind::kTagged: {
      size_t total_sent = 0, total_received = 0;
      for (const Message& m : c.sends) total_sent += m.count;
      for (const Message& m : c.recvs) total_received += m.count;
      fill(send, 0, total_sent);
      poison(recv, total_received);
      if (k.kind == Kind::kSendRecv) {
        check("rrGroupStart", rrGroupStart());
        for (const Message& m : c.sends) check("rrSend", rrSend(send + m.offset * e, m.count, k.dtype, m.peer, comm, nullptr));
        for (const Message& m : c.recvs) check("rrRecv", rrRecv(recv + m.offset * e, m.count, k.dtype, m.peer, comm, nullptr));
        check("rrGroupEnd", rrGroupEnd());
        break;
      }
      c.requests.clear();
      for (Message& m : c.recvs) {
        m.request = c.requests.size();
        c.requests.push_back(nullptr);
        const int peer = m.any_source ? RR_ANY_SOURCE : m.peer;
        check(k.kind == Kind::kTagged ? "rrIrecvTag" : "rrIrecv",
              k.kind == Kind::kTagged
                  ? rrIrecvTag(recv + m.offset * e, m.count, k.dtype, peer, m.tag, comm, &c.requests.back())
                  : rrIrecv(recv + m.offset * e, m.count, k.dtype, peer, comm, &c.requests.back()));
      }
      for (Message& m : c.sends) {
        m.request = c.requests.size();
        c.requests.push_back(nullptr);
        check(k.kind == Kind::kTagged ? "rrIsendTag" : "rrIsend",
              k.kind == Kind::kTagged
                  ? rrIsendTag(send + m.offset * e, m.count, k.dtype, m.peer, m.tag, comm, &c.requests.back())
                  : rrIsend(send + m.offset * e, m.count, k.dtype, m.peer, comm, &c.requests.back()));
      }
      break;
    }
    case Kind::kSplit: break;
  }
  // The call's own requests are waited in a drawn order.
  c.wait_perm.resize(c.requests.size());
  for (size_t i = 0; i < c.wait_perm.size(); ++i) c.wait_perm[i] = i;
  Rng rng(k.detail ^ 0x57414954ull);
  for (size_t i = c.wait_perm.size(); i > 1; --i) std::swap(c.wait_perm[i - 1], c.wait_perm[rng.below(i)]);
}

void Runner::wait(Issued& c, size_t i) {
  const Call& k = *c.call;
  rrStatus_t status{-9, -9, 0};
  const rrResult_t r = k.kind == Kind::kTagged ? rrWaitStatus(c.requests[i], &status) : rrWait(c.requests[i]);
  if (r != rrSuccess) {
    die("rank " + std::to_string(world_rank_) + ": " + c.describe() + ": waiting for request " + std::to_string(i) +
        " failed: " + rrGetErrorString(r) + ": " + rrGetLastError(c.comm->handle));
  }
  c.requests[i] = nullptr;
  if (k.kind != Kind::kTagged) return;
  // rrWaitStatus must describe the message: a receive's sender (also when
  // posted from RR_ANY_SOURCE), the tag, the count; a send's: this rank.
  for (const auto* list : {&c.recvs, &c.sends}) {
    for (const Message& m : *list) {
      if (m.request != i) continue;
      const int source = list == &c.sends ? c.me : m.peer;
      if (status.source != source || status.tag != m.tag || status.count != m.count) {
        die("rank " + std::to_string(world_rank_) + ": WRONG STATUS in " + c.describe() + ": " +
            (list == &c.sends ? "send to " : (m.any_source ? "RR_ANY_SOURCE receive from " : "receive from ")) +
            std::to_string(m.peer) + ", tag " + std::to_string(m.tag) + ": expected source " +
            std::to_string(source) + " tag " + std::to_string(m.tag) + " count " + std::to_string(m.count) +
            ", got source " + std::to_string(status.source) + " tag " + std::to_string(status.tag) + " count " +
            std::to_string(status.count));
      }
    }
  }
}

void Runner::split_reversed(const Call& call) {
  Comm& churned = (*comms_)[kReversed];
  if (rrCommDestroy(churned.handle) != rrSuccess) {
    die("rank " + std::to_string(world_rank_) + ": call " + std::to_string(call.index) +
        ": rrCommDestroy of the 'reversed' communicator failed: " + rrGetLastError(churned.handle));
  }
  churned = Comm{};
  // Each remake a new shape, keyed by the call so every rank draws the same.
  const Shape shape = draw_shape(seed_, kReversed, call.index, world_size_);
  const rrConfig_t config = shape.config(world_rank_);
  if (rrCommSplit((*comms_)[kWorld].handle, 0, world_size_ - 1 - world_rank_, &churned.handle,
                  random_shapes_ ? &config : nullptr) != rrSuccess) {
    die("rank " + std::to_string(world_rank_) + ": call " + std::to_string(call.index) +
        ": rrCommSplit of a new 'reversed' communicator failed: " + rrGetLastError((*comms_)[kWorld].handle));
  }
  learn_members(&churned, world_rank_);
  if (random_shapes_ && world_rank_ == 0) {
    std::printf("soak: call %" PRIu64 ": communicator 'reversed' remade: %s\n", call.index,
                shape.describe(churned.members).c_str());
    std::fflush(stdout);
  }
}

}  // namespace soak
