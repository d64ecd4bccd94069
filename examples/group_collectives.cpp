// Every collective on a sub-group, after PyTorch's "Writing Distributed
// Applications": the group is ranks 0 and 1 (new_group([0, 1])); the other
// ranks opt out. Run: rr-run -n 4 examples/group_collectives
#include <ringreduce/ringreduce.h>

#include <cstdio>
#include <vector>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    rrResult_t r_ = (call);                                                               \
    if (r_ != rrSuccess) {                                                                \
      std::fprintf(stderr, "%s: %s: %s\n", #call, rrGetErrorString(r_), rrGetLastError(nullptr)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main() {
  rrComm_t world = nullptr;
  CHECK(rrCommInitFromEnv(&world));
  int rank = 0, size = 0;
  CHECK(rrCommUserRank(world, &rank));
  CHECK(rrCommCount(world, &size));

  // new_group([0, 1]): ranks 0 and 1 get color 0, everyone else opts out.
  rrComm_t group = nullptr;
  CHECK(rrCommSplit(world, rank < 2 ? 0 : RR_SPLIT_NOCOLOR, rank, &group, nullptr));
  bool ok = true;
  if (group) {
    int n = 0, me = 0;
    CHECK(rrCommCount(group, &n));
    CHECK(rrCommUserRank(group, &me));

    float tensor = 1.0f;  // all_reduce(SUM): every member holds n
    CHECK(rrAllReduce(&tensor, &tensor, 1, rrFloat32, rrSum, group, nullptr));
    std::printf("Rank %d all_reduce: %.1f\n", rank, tensor);
    ok &= tensor == static_cast<float>(n);

    float value = static_cast<float>(me * 10);  // broadcast from group rank 0
    CHECK(rrBroadcast(&value, &value, 1, rrFloat32, 0, group, nullptr));
    ok &= value == 0.0f;

    float product = 0;  // reduce(PRODUCT) of (me + 2) to group rank 0
    const float factor = static_cast<float>(me + 2);
    CHECK(rrReduce(&factor, &product, 1, rrFloat32, rrProd, 0, group, nullptr));
    if (me == 0) ok &= product == (n == 2 ? 6.0f : 2.0f);

    std::vector<int32_t> gathered(static_cast<size_t>(n));  // all_gather of ranks
    const int32_t mine = rank;
    CHECK(rrAllGather(&mine, gathered.data(), 1, rrInt32, group, nullptr));
    for (int i = 0; i < n; ++i) ok &= gathered[static_cast<size_t>(i)] == i;

    std::vector<int32_t> blocks = {100, 101};  // scatter from 0: member i gets 100 + i
    int32_t got = -1;
    CHECK(rrScatter(blocks.data(), &got, 1, rrInt32, 0, group, nullptr));
    ok &= got == 100 + me;

    std::vector<int32_t> at_root(static_cast<size_t>(n), -1);  // gather to 0
    CHECK(rrGather(&got, at_root.data(), 1, rrInt32, 0, group, nullptr));
    if (me == 0) for (int i = 0; i < n; ++i) ok &= at_root[static_cast<size_t>(i)] == 100 + i;

    std::vector<int32_t> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));  // all_to_all
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = me * 10 + i;
    CHECK(rrAllToAll(out.data(), in.data(), 1, rrInt32, group, nullptr));
    for (int i = 0; i < n; ++i) ok &= in[static_cast<size_t>(i)] == i * 10 + me;

    float partial = 0;  // reduce_scatter: member i gets the sum of everyone's block i
    std::vector<float> contributions(static_cast<size_t>(n), 1.0f);
    CHECK(rrReduceScatter(contributions.data(), &partial, 1, rrFloat32, rrSum, group, nullptr));
    ok &= partial == static_cast<float>(n);

    CHECK(rrBarrier(group, nullptr));
    CHECK(rrCommDestroy(group));
  }
  CHECK(rrBarrier(world, nullptr));
  std::printf("Rank %d: collectives on the group %s\n", rank, ok ? "correct" : "WRONG");
  CHECK(rrCommDestroy(world));
  return ok ? 0 : 1;
}
