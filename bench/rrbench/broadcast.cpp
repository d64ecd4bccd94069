// Broadcast: recv = the root's send, on every rank; busbw = algbw (a
// pipelined chain carries the buffer once over every link).

#include "collective.h"
#include "reference.h"

namespace rrbench {

namespace {

using namespace collective_parts;

void fill_input(const RowSpec& row, void* send) { fill_rank_input(row, row.count, send); }

std::size_t count_wrong(const RowSpec& row, const void* recv) {
  return count_mismatches(row, recv, row.count,
                          [&](std::size_t i) { return input_value(row.type, row.op, row.root, i, row.seed); });
}

}  // namespace

const Collective kBroadcast = {
    CollKind::kBroadcast,
    "broadcast",
    /*has_op=*/false,
    /*has_root=*/true,
    /*has_in_place=*/true,
    /*row_count=*/whole,
    /*send_count=*/row_elements,
    /*recv_count=*/row_elements,
    /*in_place_send_offset=*/at_start,
    /*in_place_recv_offset=*/at_start,
    fill_input,
    count_wrong,
};

}  // namespace rrbench
