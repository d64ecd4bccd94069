// All-gather: recv[p x c + j] = rank p's send[j], c = count / N, on every
// rank. The size column is the whole output (N x c elements), as in
// nccl-tests; busbw = algbw x (N-1)/N. In place, send = recv + r x c.

#include "collective.h"
#include "reference.h"

namespace rrbench {

namespace {

using namespace collective_parts;

void fill_input(const RowSpec& row, void* send) { fill_rank_input(row, per_rank_elements(row), send); }

std::size_t count_wrong(const RowSpec& row, const void* recv) {
  const std::size_t block = per_rank_elements(row);
  return count_mismatches(row, recv, block * static_cast<std::size_t>(row.nranks), [&](std::size_t i) {
    return input_value(row.type, row.op, static_cast<int>(i / block), i % block, row.seed);
  });
}

}  // namespace

const Collective kAllGather = {
    CollKind::kAllGather,
    "allgather",
    /*has_op=*/false,
    /*has_root=*/false,
    /*has_in_place=*/true,
    /*row_count=*/multiple_of_ranks,
    /*send_count=*/per_rank_elements,
    /*recv_count=*/row_elements,
    /*in_place_send_offset=*/at_rank_block,
    /*in_place_recv_offset=*/at_start,
    fill_input,
    count_wrong,
};

}  // namespace rrbench
