// All-to-all: rank r's recv[p x c + j] = rank p's send[r x c + j], c =
// count / N. The size column is each rank's whole buffer; busbw = algbw x
// (N-1)/N. No in-place form (rrAllToAll's buffers must not overlap).

#include "collective.h"
#include "reference.h"

namespace rrbench {

namespace {

using namespace collective_parts;

void fill_input(const RowSpec& row, void* send) { fill_rank_input(row, row.count, send); }

std::size_t count_wrong(const RowSpec& row, const void* recv) {
  const std::size_t block = per_rank_elements(row);
  const std::size_t mine = static_cast<std::size_t>(row.rank) * block;
  return count_mismatches(row, recv, row.count, [&](std::size_t i) {
    return input_value(row.type, row.op, static_cast<int>(i / block), mine + i % block, row.seed);
  });
}

}  // namespace

const Collective kAllToAll = {
    CollKind::kAllToAll,
    "alltoall",
    /*has_op=*/false,
    /*has_root=*/false,
    /*has_in_place=*/false,
    /*row_count=*/multiple_of_ranks,
    /*send_count=*/row_elements,
    /*recv_count=*/row_elements,
    /*in_place_send_offset=*/at_start,
    /*in_place_recv_offset=*/at_start,
    fill_input,
    count_wrong,
};

}  // namespace rrbench
