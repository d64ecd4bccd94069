// Reduce-scatter: rank r's recv[j] = op over ranks of send[r x c + j], c =
// count / N. The size column is the whole input (N x c elements), as in
// nccl-tests; busbw = algbw x (N-1)/N. In place, recv = send + r x c.

#include <vector>

#include "collective.h"
#include "reference.h"

namespace rrbench {

namespace {

using namespace collective_parts;

void fill_input(const RowSpec& row, void* send) { fill_rank_input(row, row.count, send); }

std::size_t count_wrong(const RowSpec& row, const void* recv) {
  const std::size_t block = per_rank_elements(row);
  const std::size_t first = static_cast<std::size_t>(row.rank) * block;
  std::vector<double> inputs(static_cast<std::size_t>(row.nranks));
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < block; ++j) {
    for (int r = 0; r < row.nranks; ++r) {
      inputs[static_cast<std::size_t>(r)] = input_value(row.type, row.op, r, first + j, row.seed);
    }
    if (!matches(load_value(row.type, recv, j), reduce_reference(row.type, row.op, inputs.data(), row.nranks))) {
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace

const Collective kReduceScatter = {
    CollKind::kReduceScatter,
    "reducescatter",
    /*has_op=*/true,
    /*has_root=*/false,
    /*has_in_place=*/true,
    /*row_count=*/multiple_of_ranks,
    /*send_count=*/row_elements,
    /*recv_count=*/per_rank_elements,
    /*in_place_send_offset=*/at_start,
    /*in_place_recv_offset=*/at_rank_block,
    fill_input,
    count_wrong,
};

}  // namespace rrbench
