// Reduce: the root's recv[i] = op over ranks of send[i]; the other ranks'
// recv is not written (and not checked). busbw = algbw.

#include <vector>

#include "collective.h"
#include "reference.h"

namespace rrbench {

namespace {

using namespace collective_parts;

void fill_input(const RowSpec& row, void* send) { fill_rank_input(row, row.count, send); }

std::size_t count_wrong(const RowSpec& row, const void* recv) {
  if (row.rank != row.root) return 0;
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

const Collective kReduce = {
    CollKind::kReduce,
    "reduce",
    /*has_op=*/true,
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
