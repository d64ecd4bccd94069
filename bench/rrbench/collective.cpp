#include "collective.h"

namespace rrbench {

const std::vector<const Collective*>& all_collectives() {
  static const std::vector<const Collective*> collectives = {&kAllReduce, &kReduceScatter, &kAllGather, &kBroadcast,
                                                             &kReduce,    &kAllToAll,      &kSendRecv};
  return collectives;
}

const Collective* find_collective(const std::string& name) {
  for (const Collective* coll : all_collectives()) {
    if (name == coll->name) return coll;
  }
  return nullptr;
}

namespace collective_parts {

std::size_t whole(std::size_t requested, int) { return requested; }
std::size_t multiple_of_ranks(std::size_t requested, int nranks) {
  return requested / static_cast<std::size_t>(nranks) * static_cast<std::size_t>(nranks);
}
std::size_t row_elements(const RowSpec& row) { return row.count; }
std::size_t per_rank_elements(const RowSpec& row) { return row.count / static_cast<std::size_t>(row.nranks); }
std::size_t at_start(const RowSpec&) { return 0; }
std::size_t at_rank_block(const RowSpec& row) { return static_cast<std::size_t>(row.rank) * per_rank_elements(row); }

void fill_rank_input(const RowSpec& row, std::size_t count, void* send) {
  for (std::size_t i = 0; i < count; ++i) {
    store_value(row.type, send, i, input_value(row.type, row.op, row.rank, i, row.seed));
  }
}

}  // namespace collective_parts

}  // namespace rrbench
