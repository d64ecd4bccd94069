// Allreduce: recv[i] = op over ranks of send[i], on every rank. The size
// column is the buffer each rank holds; busbw = algbw x 2(N-1)/N.

#include <vector>

#include "collective.h"
#include "reference.h"

namespace rrbench {

namespace {

using namespace collective_parts;

void fill_input(const RowSpec& row, void* send) { fill_rank_input(row, row.count, send); }

std::size_t count_wrong(const RowSpec& row, const void* recv) {
  std::vector<double> inputs(static_cast<std::size_t>(row.nranks));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < row.count; ++i) {
    for (int r = 0; r < row.nranks; ++r) inputs[static_cast<std::size_t>(r)] = input_value(row.type, row.op, r, i, row.seed);
    if (!matches(load_value(row.type, recv, i), reduce_reference(row.type, row.op, inputs.data(), row.nranks))) {
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace

const Collective kAllReduce = {
    CollKind::kAllReduce,
    "allreduce",
    /*has_op=*/true,
    /*has_root=*/false,
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
