// A collective as rr-bench measures it: its bandwidth factor, how many
// elements each rank sends and receives for a row, where an in-place call's
// buffers lie, and how a rank checks its own result. One file per collective
// defines one of these (allreduce.cpp, reducescatter.cpp, ...); adding one is
// a new file plus a line in collective.cpp and a case in each backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bandwidth.h"
#include "dtype.h"

namespace rrbench {

// One row of the sweep, as every rank sees it.
struct RowSpec {
  DataType type;
  RedOp op;
  int root;           // -1 for collectives without one
  std::size_t count;  // the count column: elements of the size column
  int rank;
  int nranks;
  uint64_t seed;      // inputs differ between rows, so a stale result fails the check
};

struct Collective {
  CollKind kind;
  const char* name;    // --coll spelling (nccl-tests' test name without _perf)
  bool has_op;         // false: the redop column reads "none"
  bool has_root;       // false: the root column reads -1
  bool has_in_place;   // false: the in-place columns read N/A
  // The count column for a requested element count: nccl-tests rounds the
  // collectives that split a buffer over ranks down to a multiple of N.
  std::size_t (*row_count)(std::size_t requested, int nranks);
  // Elements in this rank's send and receive buffers.
  std::size_t (*send_count)(const RowSpec& row);
  std::size_t (*recv_count)(const RowSpec& row);
  // In place, one buffer holds both: where send and recv start in it, in
  // elements (NCCL's layouts: allgather sends from recv + rank x sendcount,
  // reduce-scatter receives at send + rank x recvcount).
  std::size_t (*in_place_send_offset)(const RowSpec& row);
  std::size_t (*in_place_recv_offset)(const RowSpec& row);
  // Writes this rank's input for the row into `send` (send_count elements).
  void (*fill_input)(const RowSpec& row, void* send);
  // Elements of this rank's result that differ from the reference.
  std::size_t (*count_wrong)(const RowSpec& row, const void* recv);

  double bus_factor(int nranks) const { return rrbench::bus_factor(kind, nranks); }
};

// Every collective rr-bench can run, in --coll all order.
const std::vector<const Collective*>& all_collectives();
// nullptr when `name` is no collective rr-bench knows.
const Collective* find_collective(const std::string& name);

extern const Collective kAllReduce;
extern const Collective kReduceScatter;
extern const Collective kAllGather;
extern const Collective kBroadcast;
extern const Collective kReduce;
extern const Collective kAllToAll;
extern const Collective kSendRecv;

// Building blocks the collective files share.
namespace collective_parts {
std::size_t whole(std::size_t requested, int nranks);             // any count
std::size_t multiple_of_ranks(std::size_t requested, int nranks);  // rounded down to k x N
std::size_t row_elements(const RowSpec& row);                      // row.count
std::size_t per_rank_elements(const RowSpec& row);                 // row.count / N
std::size_t at_start(const RowSpec& row);                          // 0
std::size_t at_rank_block(const RowSpec& row);                     // rank x count / N
// send[i] = input(rank, i) for i < send_count.
void fill_rank_input(const RowSpec& row, std::size_t count, void* send);
// Elements of recv[0..count) that differ from exact(i), compared exactly.
template <typename Expected>
std::size_t count_mismatches(const RowSpec& row, const void* recv, std::size_t count, Expected exact);
}  // namespace collective_parts

}  // namespace rrbench

#include "reference.h"

namespace rrbench::collective_parts {
template <typename Expected>
std::size_t count_mismatches(const RowSpec& row, const void* recv, std::size_t count, Expected exact) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (load_value(row.type, recv, i) != exact(i)) ++wrong;
  }
  return wrong;
}
}  // namespace rrbench::collective_parts
