#pragma once
// One call of a batch between its issue and its check: where its inputs and
// outputs lie, its requests, and the wrong elements found (calls.cpp issues
// and waits, check.cpp checks).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "calls.hpp"

namespace soak {

// Output buffers are filled with this before each call, so an element the
// engine never wrote is seen (and alltoallv's gaps must still hold it after).
constexpr uint8_t kPoison = 0xA5;

// Point-to-point calls: up to 3 messages to the right neighbour and 2 to the
// left, each of 0..count elements.
constexpr size_t kMaxMessages = 5;

struct Message {
  int peer = 0;  // comm rank: to (send) or from (receive); receives may post RR_ANY_SOURCE
  bool any_source = false;
  int tag = 0;
  size_t offset = 0;  // in this rank's send or receive buffer, elements
  size_t count = 0;
  size_t source_offset = 0;  // receives: where the sender took it from in its send buffer
  size_t request = 0;        // position in Issued::requests
};

// Alltoallv's layout, the same on every rank: each block lies at a drawn
// offset within a region of `count` elements, the regions in a drawn
// rotation, so blocks are uneven, sometimes empty, and leave gaps.
struct Block {
  size_t count, send_displ, recv_displ;
};
Block alltoallv_block(uint64_t detail, size_t count, int n, int from, int to);

// The drawn call this thread is issuing, waiting for or checking, for die()'s
// report (null between calls).
void set_current_call(const Call* call);

struct Runner::Issued {
  const Call* call = nullptr;
  Comm* comm = nullptr;
  int n = 1, me = 0, root = 0;
  size_t elem = 1, count = 0;
  std::vector<uint64_t> keys;  // [comm rank] the key of that rank's input
  uint8_t* send = nullptr;     // the slot's buffers
  uint8_t* recv = nullptr;
  std::vector<rrRequest_t> requests;
  std::vector<size_t> wait_perm;  // this call's requests, in the order waited
  std::vector<Message> sends, recvs;
  std::vector<size_t> scounts, sdispls, rcounts, rdispls;  // alltoallv
  std::vector<size_t> source_displs;  // alltoallv: [p] where rank p's block for me lies in its sendbuff
  size_t wrong = 0;
  std::string report;  // the first wrong elements

  int left() const { return (me + n - 1) % n; }
  int right() const { return (me + 1) % n; }
  bool reduction() const { return takes_op(call->kind); }
  std::string describe() const;
};

}  // namespace soak
