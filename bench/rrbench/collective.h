// A collective as rr-bench measures it: its bandwidth factor, how many
// elements each rank sends and receives for a row, and how a rank checks its
// own result. One file per collective defines one of these (allreduce.cpp);
// adding a collective is a new file plus a line in collective.cpp.
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
  const char* name;   // --coll spelling
  bool has_op;        // false: the redop column reads "none"
  bool has_root;      // false: the root column reads -1
  // Elements in this rank's send and receive buffers for a row.
  std::size_t (*send_count)(const RowSpec& row);
  std::size_t (*recv_count)(const RowSpec& row);
  // Where an in-place call's input starts in the receive buffer, in elements
  // (0 for allreduce; rank x count for allgather, as NCCL lays it out).
  std::size_t (*in_place_offset)(const RowSpec& row);
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

}  // namespace rrbench
