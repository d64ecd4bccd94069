// Send/receive around the ring: rank r sends its buffer to r+1 and receives
// r-1's, both at once (nccl-tests' sendrecv). busbw = algbw. Out of place
// only: a rank's outgoing and incoming buffers are distinct.

#include "collective.h"
#include "reference.h"

namespace rrbench {

namespace {

using namespace collective_parts;

void fill_input(const RowSpec& row, void* send) { fill_rank_input(row, row.count, send); }

std::size_t count_wrong(const RowSpec& row, const void* recv) {
  const int left = (row.rank + row.nranks - 1) % row.nranks;
  return count_mismatches(row, recv, row.count,
                          [&](std::size_t i) { return input_value(row.type, row.op, left, i, row.seed); });
}

}  // namespace

const Collective kSendRecv = {
    CollKind::kSendRecv,
    "sendrecv",
    /*has_op=*/false,
    /*has_root=*/false,
    /*has_in_place=*/false,
    /*row_count=*/whole,
    /*send_count=*/row_elements,
    /*recv_count=*/row_elements,
    /*in_place_send_offset=*/at_start,
    /*in_place_recv_offset=*/at_start,
    fill_input,
    count_wrong,
};

}  // namespace rrbench
